"""lab/benchmarks/understand.py at tiny size: every answer rule timed on one caption, its forwards
reported against the official order's, and the 8B projection labelled as projected."""

from __future__ import annotations

from pathlib import Path

from support.scripts import bench_json

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
