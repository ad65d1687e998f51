"""Smoke tests: every benchmark script runs at tiny sizes and writes its documented JSON fields.

Timings are never asserted (they belong to the scripts' printed ratios); counts and equalities
the scripts report are, where they are deterministic.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support.scripts import bench_json, run_script


def run(name: str, out: Path, *extra: str) -> dict[str, Any]:
    """A script at --tiny size (torch's thread setting left alone); returns its JSON."""
    doc = bench_json(name, out, *extra)
    assert doc["benchmark"] == name
    return doc


def test_sampler_overhead_fields(tmp_path: Path) -> None:
    doc = run("sampler_overhead", tmp_path, "--batch", "1", "--steps", "2")
    cases = {r["case"] for r in doc["rows"]}
    assert {"floor (softmax+top2)", "baseline@T=1", "ladr@T=1", "prophet@T=1",
            "baseline@T=0", "ladr@T=0", "prophet@T=0"} <= cases
    for r in doc["rows"]:
        assert r["per_step_ms"] > 0 and r["ratio_to_floor"] > 0
        if "@T=" in r["case"]:
            assert r["paired_ratio"] > 0 and r["meets_target"] == (r["paired_ratio"] <= 2.0)
        if "top_ops" in r:  # profiled because it missed the target at this size
            assert r["top_ops"] and {"op", "self_cpu_ms", "share"} <= set(r["top_ops"][0])


def test_host_syncs_counts_at_most_one_per_step(tmp_path: Path) -> None:
    doc = run("host_syncs", tmp_path)
    strategies = {r["strategy"] for r in doc["rows"]}
    assert strategies == {"baseline", "ladr", "prophet"}
    assert len(doc["rows"]) >= 6 + 6 + 3
    for r in doc["rows"]:
        assert r["total_syncs"] <= r["steps"], r  # the contract; counting is deterministic
        assert r["total_syncs"] >= r["steps"] - 1  # the early-exit check itself is seen
    assert doc["all_meet_target"] is True


def test_native_forward_cfg_equal_without_official(tmp_path: Path) -> None:
    doc = run("native_forward", tmp_path)
    cfg = doc["cfg_batched_vs_two_calls"]
    assert cfg["max_abs_diff"] < 1e-4
    assert cfg["speed_ratio_two_calls_over_batched"] > 0
    assert doc["native_vs_official"] is None


def test_native_forward_official_folder_must_hold_the_files(tmp_path: Path) -> None:
    proc = run_script("lab.benchmarks.native_forward", "--tiny", "--threads", "0", "--out",
                      str(tmp_path), "--official", str(tmp_path), ok=False)
    assert proc.returncode != 0 and "modeling_llada.py" in proc.stderr


def test_ml_cache_fields(tmp_path: Path) -> None:
    doc = run("ml_cache", tmp_path)
    rows = {r["case"]: r for r in doc["rows"]}
    assert set(rows) == {"baseline", "baseline+cache", "ladr", "ladr+cache", "prophet",
                         "prophet+cache", "ladr-nano", "ladr-nano+cache", "ladr+cache-ladr",
                         "ladr-nano+cache-ladr"}
    assert rows["baseline"]["saved_vs_baseline"] == 0.0
    assert 0.0 < rows["baseline+cache"]["saved_within_run"] < 1.0
    assert rows["ladr"]["nfe"] < rows["baseline"]["nfe"]
    assert doc["model"] and doc["cache_config"]["cache_ratio"] == 0.9
    for name, r in rows.items():  # every call is a refresh or a cached call, with a cache only
        assert r["refresh_calls"] + r["cached_calls"] == (r["nfe"] if r["ml_cache"] else 0), name
    mem = doc["memory"]
    assert mem["kept_bytes"] > mem["kv_bytes"] > 0
    assert mem["extra_over_kept"] <= 1.02  # the cache itself and nothing twice


def test_loader_memory_fields(tmp_path: Path) -> None:
    doc = run("loader_memory", tmp_path, "--no-naive", "--cache-dir", str(tmp_path / "ckpt"))
    load = doc["cases"]["load_dimoo"]
    assert load["dtype"] == "torch.bfloat16"
    assert load["params"] * 2 == doc["weight_bytes"]
    assert load["VmHWM"] >= doc["cases"]["baseline"]["VmHWM"] > 0
    assert {"ratio", "meets_target", "target_ratio"} <= set(doc)


def test_loader_memory_fp8_fields(tmp_path: Path) -> None:
    doc = bench_json("loader_memory", tmp_path, "--weight-dtype", "fp8_e4m3fn", "--cache-dir",
                     str(tmp_path / "ckpt"), file="loader_memory_fp8_e4m3fn.json")
    load = doc["cases"]["load_dimoo"]
    assert doc["benchmark"] == "loader_memory_fp8_e4m3fn" and "naive" not in doc["cases"]
    # fp8 block linears + scales, bf16 embedding/head: fewer bytes than the bf16 weights
    assert doc["weight_bytes"] / 2 < load["result_bytes"] == doc["ratio_denominator_bytes"] \
        < doc["weight_bytes"]
    assert doc["ratio"] == load["ratio_to_weights"]


def test_preview_cost_fields(tmp_path: Path) -> None:
    doc = run("preview_cost", tmp_path)
    cases = [(r["size"], r["case"]) for r in doc["rows"]]
    assert len(cases) == 6 and sum(c == "node callback" for _, c in cases) == 2
    assert all(r["share"] > 0 for r in doc["rows"])
    assert doc["table_shape"][-1] == 3


def test_end_to_end_fields(tmp_path: Path) -> None:
    doc = run("end_to_end", tmp_path)
    assert {(r["batch"], r["strategy"]) for r in doc["rows"]} == {
        (b, s) for b in (1, 2) for s in ("baseline", "ladr", "prophet")}
    assert all(r["images_per_s"] > 0 and r["nfe"] >= 1 for r in doc["rows"])


def test_summary_renders_every_script(tmp_path: Path) -> None:
    for name in ("host_syncs", "native_forward"):
        run(name, tmp_path)
    table = run_script("lab.benchmarks.summary", "--results", str(tmp_path)).stdout
    assert table.startswith("| Figure | Measured | Target | Met |")
    assert "host syncs/step in sample(), ladr" in table and "batched CFG" in table
    assert "unreadable" not in table


def test_rolling_modes_give_single_images_and_forwards(tmp_path: Path) -> None:
    """lab/benchmarks/rolling.py: every mode gives each image of its single run, and only the batch
    that keeps finished images pushes more tokens than the single runs together."""
    doc = bench_json("rolling", tmp_path, "--prompts", "3", "--in-flight", "2",
                     "--strategies", "ladr-nano", "baseline-64")
    for name, rows in doc["rows"].items():
        modes = {r["mode"]: r for r in rows}
        assert set(modes) == {"single", "batch-stay", "batch", "rolling-2"}, name
        assert all(r["identical"] for r in rows), name
        assert modes["batch"]["token_forwards"] == modes["single"]["token_forwards"], name
        assert modes["rolling-2"]["token_forwards"] == modes["single"]["token_forwards"], name
        assert modes["batch-stay"]["token_forwards"] >= modes["single"]["token_forwards"], name
    assert len(doc["finish_nfe"]) == 3
