"""The soak benchmark (lab/benchmarks/soak.py) on the tiny fixture holds the product's runs to no
leak: the reliability tests without the lab are tests/dimoo/test_reliability.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import ROOT


@pytest.mark.slow
def test_100_generations_leak_no_tensors_and_no_memory(dimoo_checkpoint: Path,
                                                       tmp_path: Path) -> None:
    """lab/benchmarks/soak.py on the tiny fixture: every strategy, with and without ML-Cache, every
    10th run interrupted. Live tensors are counted exactly (gc); RSS only needs to stay flat
    within allocator noise (a leaked tensor per run shows up in the exact count first)."""
    out = subprocess.run(
        [sys.executable, "-m", "lab.benchmarks.soak", "--model", str(dimoo_checkpoint), "--gens",
         "100", "--warmup", "6", "--steps", "4", "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    doc = json.loads((tmp_path / "soak.json").read_text())
    assert doc["gens"] == 100 and len(doc["rss"]) == 100
    assert doc["live_tensors_min"] == doc["live_tensors_max"], doc["live_tensors"]
    assert doc["rss_growth_median"] < 16 * 2**20, doc["rss"]
