"""Quality benchmark plumbing: the test prompt set, its separation from tuning, paired CIs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks.paired_stats import group_index, paired_bootstrap, ratio_ci, scores
from testbed import scenes


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
    from benchmarks.quality import prompt_set, separation

    specs, seed0 = prompt_set("test", 490)
    assert seed0 == scenes.TEST_IMAGE_SEED > 10_000
    sep = separation(specs, seed0, validation_n=288)
    assert sep["shared_caption_seed_items"] == 0
    val, vseed = prompt_set("validation", 96)
    assert vseed == 0 and separation(val, vseed, 288)["shared_caption_seed_items"] == 96


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


def test_chunks_are_stored_reused_and_a_cut_off_run_scores_its_complete_chunks(tmp_path, capsys):
    from benchmarks import quality

    out = tmp_path / "q.json"
    common = ["--prompts", "3", "--batch", "2", "--json", str(out)]
    quality.main([*common, "--strategies", "baseline-2,baseline-3"])
    first = json.loads(out.read_text())
    assert first["meta"]["set"] == "test" and first["meta"]["prompts"] == 3
    assert first["meta"]["separation"]["shared_caption_seed_items"] == 0
    assert [c["a"] for c in first["compare"]] == []  # no baseline-64: nothing to compare with
    assert sorted(p.name for p in (tmp_path / "q_runs" / "test" / "baseline-2").iterdir()) == [
        "00000.npz", "00002.npz"]
    capsys.readouterr()
    again = quality.main([*common, "--strategies", "baseline-2,baseline-3", "--reuse", "only"])
    assert "(reused)" in capsys.readouterr().out
    assert again["baseline-3"]["passed"] == first["strategies"]["baseline-3"]["passed"]
    (tmp_path / "q_runs" / "test" / "baseline-3" / "00002.npz").unlink()  # cut off mid-chunk
    cut = quality.main([*common, "--strategies", "baseline-2,baseline-3", "--reuse", "only"])
    assert len(cut["baseline-2"]["passed"]) == 2 == len(cut["baseline-3"]["nfe"])
    with pytest.raises(SystemExit):  # a strategy never generated: nothing complete to score
        quality.main([*common, "--strategies", "baseline-2,baseline-4", "--reuse", "only"])


def test_strategy_names_resolve():
    from benchmarks.quality import resolve, strategy_table

    table = strategy_table(64)
    assert {"ladr-adaptive", "ladr-nano", "ladr-adaptive-random-candidates",
            "ladr-adaptive-non-neighbors", "ladr-adaptive-confidence",
            "ladr-adaptive-random-metric"} <= set(table)
    assert resolve("baseline-19", table) == {"strategy": "baseline", "steps": 19}
    assert resolve("baseline-0", table) is None and resolve("fastest", table) is None
    abl = table["ladr-adaptive-confidence"]["policy"]
    assert abl.metric == "confidence" and abl.adaptive == table["ladr-adaptive"]["policy"].adaptive
