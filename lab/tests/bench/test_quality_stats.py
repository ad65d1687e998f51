"""Quality benchmark plumbing: the test prompt set, its separation from tuning, paired CIs, and
lab/studies/quality.py run as a program (chunks stored, reused, a cut-off run scored)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from support.scripts import run_script

from lab.nano import scenes
from lab.studies import run_store
from lab.studies.paired_stats import group_index, paired_bootstrap, ratio_ci, scores


def test_test_set_cycles_groups_with_seen_and_unseen_colour_pairs():
    specs = scenes.quality_test_specs(490)
    assert specs == scenes.quality_test_specs(490)
    groups = [scenes.group_of(s) for s in specs]
    assert groups[:7] == list(scenes.TEST_GROUPS) and len(set(groups)) == 7
    assert all(groups.count(g) == 70 for g in scenes.TEST_GROUPS)
    unseen = [s for s in specs if scenes.group_of(s) == "color_attr_unseen"]
    seen = [s for s in specs if scenes.group_of(s) == "color_attr_seen"]
    assert all(scenes.is_heldout(s) for s in unseen) and not any(map(scenes.is_heldout, seen))
    assert all(s.category == "color_attr" for s in seen + unseen)
    assert not any(scenes.is_heldout(s) for s in specs if s.category != "color_attr")
    with pytest.raises(ValueError, match="n must be positive"):
        scenes.quality_test_specs(0)


def test_test_items_never_meet_tuning_items():
    """No (caption, seed) item of the test set occurs in the validation set used for tuning."""
    specs, seed0 = scenes.prompt_set("test", 490)
    assert seed0 == scenes.TEST_IMAGE_SEED > 10_000
    sep = scenes.separation(specs, seed0, validation_n=288)
    assert sep["shared_caption_seed_items"] == 0
    val, vseed = scenes.prompt_set("validation", 96)
    assert vseed == 0 and scenes.separation(val, vseed, 288)["shared_caption_seed_items"] == 96


def test_scores_overall_is_the_six_categories_without_unseen_pairs():
    groups = list(scenes.TEST_GROUPS) * 2
    gidx = group_index(groups)
    passed = np.array([g != "color_attr_unseen" for g in groups])
    sc = scores(passed, gidx)
    assert sc["overall"] == 1.0 and sc["color_attr_unseen"] == 0.0
    with pytest.raises(ValueError, match="unknown report groups"):
        group_index(["texture"])


def test_paired_bootstrap_intervals():
    rng = np.random.default_rng(0)
    gidx = group_index(list(scenes.TEST_GROUPS) * 40)
    a = rng.random(280) < 0.7
    same = paired_bootstrap(a, a, gidx)
    assert all(v == {"diff": 0.0, "lo": 0.0, "hi": 0.0} for v in same.values())
    b = a.copy()
    b[:40] = False  # b fails 40 prompts a passed or failed: a is never worse
    d = paired_bootstrap(a, b, gidx)["overall"]
    assert d["lo"] >= 0.0 and d["lo"] <= d["diff"] <= d["hi"] and d["diff"] > 0
    noisy = paired_bootstrap(a, rng.random(280) < 0.7, gidx)["overall"]
    assert noisy["lo"] < noisy["diff"] < noisy["hi"] and noisy["hi"] - noisy["lo"] > 0.05
    with pytest.raises(ValueError, match="equal shapes"):
        paired_bootstrap(a, a[:-1], gidx)


def test_ratio_ci():
    nfe = np.arange(50) % 20 + 10
    r = ratio_ci(np.full(50, 64), nfe)
    assert r["lo"] < r["ratio"] < r["hi"] and abs(r["ratio"] - 64 / nfe.mean()) < 1e-9


def quality(*args: str, ok: bool = True):
    return run_script("lab.studies.quality", *args, ok=ok)


def test_chunks_are_stored_reused_and_a_cut_off_run_scores_its_complete_chunks(tmp_path):
    out = tmp_path / "q.json"
    common = ["--prompts", "3", "--batch", "2", "--json", str(out)]
    quality(*common, "--strategies", "baseline-2,baseline-3")
    first = json.loads(out.read_text())
    assert first["meta"]["set"] == "test" and first["meta"]["prompts"] == 3
    assert first["meta"]["separation"]["shared_caption_seed_items"] == 0
    assert [c["a"] for c in first["compare"]] == []  # no baseline-64: nothing to compare with
    store = run_store.set_file(tmp_path / "q_runs", "test")
    assert run_store.chunk_starts(store, "baseline-2") == [0, 2]
    again = quality(*common, "--strategies", "baseline-2,baseline-3", "--reuse", "only")
    assert "(reused)" in again.stdout
    assert json.loads(out.read_text())["strategies"]["baseline-3"]["passed"] == \
        first["strategies"]["baseline-3"]["passed"]
    run_store.drop_chunk(store, "baseline-3", 2)  # cut off before its second chunk
    quality(*common, "--strategies", "baseline-2,baseline-3", "--reuse", "only")
    cut = json.loads(out.read_text())["strategies"]
    assert len(cut["baseline-2"]["passed"]) == 2 == len(cut["baseline-3"]["nfe"])
    never = quality(*common, "--strategies", "baseline-2,baseline-4", "--reuse", "only", ok=False)
    assert never.returncode == 2 and "no complete chunk" in never.stderr  # nothing to score


def test_strategy_names_resolve():
    names = set(quality("--list").stdout.split())
    assert {"ladr-adaptive", "ladr-nano", "ladr-adaptive-random-candidates",
            "ladr-adaptive-non-neighbors", "ladr-adaptive-confidence",
            "ladr-adaptive-random-metric"} <= names
    for bad in ("baseline-0", "fastest"):  # baseline-<T> needs T >= 1
        refused = quality("--strategies", bad, "--json", "/dev/null", ok=False)
        assert refused.returncode == 2 and bad in refused.stderr
