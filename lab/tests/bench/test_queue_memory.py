"""lab/benchmarks/queue_memory.py run as a program: the plan's images in flight fit the card's
free memory at the plan's bytes per image, and a run of those images holds no more than the plan
grants them (the 8B shape, one layer, 512 px, on the emulated device)."""

from __future__ import annotations

import json
import subprocess
import sys

from lab.benchmarks.common import REPO_ROOT


def test_a_run_holds_no_more_than_the_plan_grants_its_images(tmp_path) -> None:  # noqa: ANN001
    done = subprocess.run([sys.executable, "-m", "lab.benchmarks.queue_memory", "--px", "512",
                           "--batches", "1,2", "--layers", "1", "--out", str(tmp_path),
                           "--label", "test"], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads((tmp_path / "queue_memory_test.json").read_text())
    assert out["env"]["git_commit"] and out["weights_gib"] > 14  # the 32-layer bf16 weights
    for plan in out["plan"].values():
        assert plan["images_in_flight"] * plan["per_image_gib"] <= 0.8 * out["free_gib"] \
            or plan["images_in_flight"] == 1
    per_image = out["plan"]["none"]["per_image_gib"]
    for batch, peak in out["peak_beyond_weights_gib"].items():
        assert 0 < peak <= int(batch) * per_image, (batch, peak, per_image)
