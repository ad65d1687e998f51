"""The quality-per-forward harness (lab/studies/quality_per_forward.py and its report): the rule
list comes from the registry, a re-run skips the stored chunks, and each row is paired with the
right official run, on stores whose answer is known by hand."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

from lab.studies import quality_per_forward as Q
from lab.studies import quality_per_forward_report as R
from lab.studies.run_store import drop_chunk, save_chunk
from ladr_core import (
    LADR,
    PRESETS,
    preset_names,
    register_strategy,
    resolve_strategy,
    strategy_names,
)
from ladr_core.registry import unregister_strategy


def test_the_rules_are_the_registrys_ladr_rules_and_the_presets_of_their_own() -> None:
    rules = Q.rules()
    assert rules[0] == "baseline"
    with_policy = {n for n in strategy_names() if hasattr(resolve_strategy(n), "policy")
                   and type(resolve_strategy(n).policy).__name__ == "LADRPolicy"}
    assert with_policy <= set(rules) and {"ladr", "ladr-global", "halton-ladr"} <= set(rules)
    assert {"nano", "adaptive"} <= set(rules)
    # the paper's policy with one field changed is an ablation of `ladr`, not a recipe
    assert not {"paper", "delayed", "off"} & set(rules)
    assert not {p for p in preset_names() if p.startswith("ablation_")} & set(rules)
    assert set(rules) - {"baseline"} <= set(strategy_names()) | set(PRESETS)


def test_a_newly_registered_ladr_rule_joins_the_list_without_an_edit() -> None:
    @register_strategy
    @dataclass(frozen=True)
    class Mine(LADR):
        name: ClassVar[str] = "test-mine-ladr"

    try:
        assert "test-mine-ladr" in Q.rules()
    finally:
        unregister_strategy("test-mine-ladr")
    assert "test-mine-ladr" not in Q.rules()


def test_bad_rules_and_shards_are_refused_with_the_names() -> None:
    with pytest.raises(SystemExit):
        Q.parse(["run", "--rules", "baseline,nope"])
    with pytest.raises(SystemExit):
        Q.parse(["run", "--shard", "2/2"])
    a = Q.parse(["run", "--rules", "ladr", "--steps", "12,8", "--shard", "1/2"])
    assert Q.jobs(["baseline", "ladr"], a.steps, (1, 2)) == [("ladr", 8), ("ladr", 12)]


@pytest.fixture(scope="module")
def tiny_nano():
    bed = Q.nano_testbed(4)
    return bed, bed.load()


def test_a_rerun_skips_the_stored_chunks_and_redoes_only_a_missing_one(tiny_nano, tmp_path):
    bed, pipe = tiny_nano
    assert Q.run_job(pipe, bed, "ladr", 3, tmp_path, chunk=2, log=lambda s: None) == 2
    first = Q.finished(tmp_path, bed, "ladr", 3, 2, pipe.default_cfg)
    assert first is not None and len(first["passed"]) == 4
    assert (first["nfe"] <= 3).all() and (first["nfe"] >= 1).all()
    assert Q.run_job(pipe, bed, "ladr", 3, tmp_path, chunk=2, log=lambda s: None) == 0
    drop_chunk(Q.store_path(tmp_path, "nano", "ladr", 3), "ladr@3", 2)
    assert Q.finished(tmp_path, bed, "ladr", 3, 2, pipe.default_cfg) is None
    assert Q.run_job(pipe, bed, "ladr", 3, tmp_path, chunk=2, log=lambda s: None) == 1
    again = Q.finished(tmp_path, bed, "ladr", 3, 2, pipe.default_cfg)
    assert again["nfe"].tolist() == first["nfe"].tolist()  # same prompts, same seeds
    assert again["passed"].tolist() == first["passed"].tolist()


def _store(runs, bed, rule, steps, passed, nfe):
    path = Q.store_path(runs, bed.name, rule, steps)
    run = {"passed": np.array(passed, bool), "nfe": np.array(nfe), "wall_s": 1.0, "cpu_s": 0.9,
           "token_forwards": np.zeros(len(nfe)), "images": np.zeros((len(nfe), 2, 2, 3))}
    save_chunk(path, f"{rule}@{steps}", 0, Q._key(rule, steps, 1.0, bed.seed0, 0, len(nfe)), run)
    Q._note(path, 0, len(nfe), run, rule)


def test_rows_pair_each_rule_with_the_official_sampler_at_64_and_at_its_forwards(tmp_path):
    groups = ["single_object", "single_object", "two_object", "two_object"]
    bed = Q.Testbed("nano", ["a"] * 4, groups, 7, "four", lambda: None, lambda lo, im: None)
    _store(tmp_path, bed, "baseline", 64, [1, 1, 1, 1], [64] * 4)
    _store(tmp_path, bed, "baseline", 12, [1, 0, 1, 0], [12] * 4)
    _store(tmp_path, bed, "baseline", 16, [0, 0, 0, 0], [16] * 4)   # not the same forwards
    _store(tmp_path, bed, "ladr", 16, [1, 1, 1, 0], [11, 12, 12, 12])  # 11.75 -> 12 steps
    rows, pending = R.rows_of(bed, tmp_path, chunk=4, cfg=1.0)
    row = next(r for r in rows if r["rule"] == "ladr")
    assert row["same_forwards_steps"] == 12 and row["forwards_mean"] == 11.75
    assert row["pass_rate"] == 0.75 and row["score"] == 0.75  # (1 + 0.5) / 2
    # by hand: single object 1 - 0.5, two objects 0.5 - 0.5 -> (0.5 + 0) / 2
    assert row["vs_same_forwards"]["diff"] == 0.25
    assert 0 <= row["vs_same_forwards"]["lo"] <= 0.25 <= row["vs_same_forwards"]["hi"] <= 0.5
    # against 64 steps: (0 + (0.5 - 1)) / 2
    assert row["vs_64"]["diff"] == -0.25 and row["vs_64"]["hi"] <= 0
    assert row["commit"] and row["device"]
    base64 = next(r for r in rows if r["rule"] == "baseline" and r["steps"] == 64)
    assert base64["vs_64"] is None and base64["score_ci"] == {"diff": 1.0, "lo": 1.0, "hi": 1.0}
    assert ("ladr", 8) in {(p["rule"], p["steps"]) for p in pending}
    assert ("ladr", 16) not in {(p["rule"], p["steps"]) for p in pending}


def test_a_rule_whose_official_run_at_its_forwards_is_missing_says_pending(tmp_path):
    bed = Q.Testbed("nano", ["a"] * 2, ["single_object"] * 2, 7, "two", lambda: None,
                    lambda lo, im: None)
    _store(tmp_path, bed, "ladr", 32, [1, 0], [9, 9])
    rows, _ = R.rows_of(bed, tmp_path, chunk=2, cfg=1.0)
    assert rows[0]["vs_same_forwards"] is None and rows[0]["vs_64"] is None
    assert "pending" in R.table({"rows": rows})
