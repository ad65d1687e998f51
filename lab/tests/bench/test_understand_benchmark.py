"""lab/benchmarks/understand.py at tiny size: every answer rule timed on one caption, its forwards
reported against the official order's, and the 8B projection labelled as projected."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import ROOT
from support.scripts import bench_json

from lab.benchmarks.understand import OFFICIAL_ANSWER, OFFICIAL_PX, QUESTION_TOKENS
from ladr_core.dimoo import answer_rule_names


def test_every_rule_is_timed_beside_the_official_order(tmp_path: Path) -> None:
    doc = bench_json("understand", tmp_path, "--force")
    rows = {r["rule"]: r for r in doc["rules"]}
    assert list(rows) == answer_rule_names()
    official = rows["official"]
    assert official["answer_tokens"] == 32 and official["forwards"] == 32 // 8
    assert official["time_vs_official"] == 1.0 and official["forwards_vs_official"] == 1.0
    for r in rows.values():
        assert r["seconds"] > 0 and 1 <= r["forwards"] <= r["answer_tokens"]
        assert r["forwards_vs_official"] == r["forwards"] / official["forwards"]
    assert rows["official+stop"]["forwards"] <= official["forwards"]
    projected = doc["projected_8b"]
    assert projected["label"].startswith("projected")
    assert projected["flops_last_block"] > projected["flops_first_block"] > 0
    assert projected["official_floor_s_per_answer"] == (
        projected["official_forwards"] * projected["floor_s_per_forward"])
    memory = projected["answer_memory_bytes"]  # noise at temperature > 0; chunks cap the rest
    assert set(memory) == {"t0_chunked", "t0_whole", "t1_chunked", "t1_whole"}
    assert 0 < memory["t0_chunked"] <= memory["t0_whole"] <= memory["t1_whole"]
    assert memory["t0_chunked"] <= memory["t1_chunked"] <= memory["t1_whole"]


@pytest.mark.committed_result("lab/results/understand.json")
def test_the_guide_cites_the_projection_of_the_results_file() -> None:
    doc = json.loads((ROOT / "lab" / "results" / "understand.json").read_text())
    projected = doc["projected_8b"]
    text = " ".join((ROOT / "docs" / "SAMPLING.md").read_text(encoding="utf-8").split())
    assert projected["label"].startswith("projected") and projected["shape"] == "8B"
    assert (f"official row ({projected['row_tokens']:,} tokens: a {QUESTION_TOKENS}-token "
            f"question, a {OFFICIAL_PX} px image, {OFFICIAL_ANSWER:,} answer tokens) is "
            f"{projected['flops_per_forward'] / 1e12:.1f} TFLOP, at least "
            f"{projected['floor_s_per_forward']:.3f} s on one H100") in text
    assert (f"official {projected['official_forwards']} forwards take at least "
            f"{projected['official_floor_s_per_answer']:.1f} s per answer") in text
    assert projected["official_floor_s_per_answer"] == pytest.approx(
        projected["official_forwards"] * projected["flops_per_forward"] / projected["peak_flops"])
