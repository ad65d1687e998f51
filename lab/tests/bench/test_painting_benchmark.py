"""lab/studies/painting.py end to end on the shipped nano model at a tiny size (3 prompts).

Counts and invariants only (never timings or scores): the masks are what the tasks say, every
setting keeps every item's known tokens, the matched-NFE baseline runs at the preset's NFE, and
the comparisons pair each preset with both baselines."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from support.scripts import run_script

from lab.nano.painting_tasks import ground_truth, task_masks


def test_task_masks_cover_what_each_task_says() -> None:
    _, _, images, objects = ground_truth(14)
    quarter, half, obj = (task_masks(t, objects) for t in ("quarter", "half", "object"))
    assert (quarter.reshape(14, -1).mean(1) == 0.25).all()
    assert (half.reshape(14, -1).mean(1) == 0.5).all()
    for m, objs in zip(obj, objects, strict=True):  # one object's box, whole tokens around it
        assert m.any() and (m.reshape(12, 4, 12, 4).std(axis=(1, 3)) == 0).all()
        assert any(m[int(o.cy), int(o.cx)] == 1 for o in objs)
    assert images.shape == (14, 48, 48, 3) and images.dtype == np.uint8


def test_writes_settings_comparisons_and_known_counts(tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    run_script("lab.studies.painting", "--prompts", "3", "--tasks", "quarter", "--presets",
               "paper", "--threads", "0", "--json", str(out))
    saved = json.loads(out.read_text())
    assert saved["tasks"].keys() == {"quarter"}
    rows = saved["tasks"]["quarter"]["settings"]
    assert list(rows) == ["baseline-64", "ladr-paper", "baseline@paper"]
    for r in rows.values():
        assert r["known_unchanged"] == r["items"] == 3 and len(r["nfe"]) == 3
        assert 0.0 <= r["score_overall"] <= 1.0
    assert rows["baseline@paper"]["steps"] == max(1, round(rows["ladr-paper"]["nfe_mean"]))
    assert [(c["a"], c["b"]) for c in saved["tasks"]["quarter"]["compare"]] == [
        ("ladr-paper", "baseline-64"), ("ladr-paper", "baseline@paper")]
    assert (tmp_path / "p_samples.png").is_file() and out.with_suffix(".md").is_file()
