"""Smoke tests of the quantization benchmarks at tiny sizes: they run and write their fields."""

from __future__ import annotations

import json
from pathlib import Path

from support.scripts import bench_json, run_script


def test_convert_memory_tiny(tmp_path: Path) -> None:
    doc = bench_json("convert_memory", tmp_path, "--cases", "gguf_q4_k_m,comfy_int8",
                     "--cache-dir", str(tmp_path / "ckpt"))
    for case in ("gguf_q4_k_m", "comfy_int8"):
        assert doc["cases"][case]["output_bytes"] > 0
        assert doc["cases"][case]["ratio_to_largest_tensor"] is not None


def test_quant_quality_smoke(tmp_path: Path) -> None:
    run_script("lab.studies.quant_quality", "--prompts", "7", "--logit-prompts", "1", "--batch",
               "7", "--threads", "0", "--variants", "fp32,comfy_int8,Q4_K_M",
               "--quality-variants", "fp32,Q4_K_M", "--strategies", "ladr-nano", "--json",
               str(tmp_path / "q.json"))
    rows = json.loads((tmp_path / "q.json").read_text())["variants"]
    assert rows["Q4_K_M"]["logits"]["calls"] == 3
    assert 0 < rows["comfy_int8"]["logits"]["rel_error_mean"] < 0.1
    q = rows["Q4_K_M"]["quality"]["ladr-nano"]
    assert len(q["passed"]) == 7 and "diff_vs_fp32" in q and "within_ci" in q
    assert (tmp_path / "q.md").is_file()
