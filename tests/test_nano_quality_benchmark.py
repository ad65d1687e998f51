"""benchmarks/quality.py end to end on the shipped nano model (2 prompts, cheap strategies)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _quality():
    spec = importlib.util.spec_from_file_location("quality", ROOT / "benchmarks" / "quality.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_strategy_table_covers_the_issue_list():
    names = set(_quality().strategy_table(64))
    assert {"baseline-8", "baseline-16", "baseline-32", "baseline-64", "ladr", "ladr-delayed",
            "prophet", "mlcache", "ladr+mlcache", "ladr-non-neighbors", "ladr-random-candidates",
            "ladr-confidence", "ladr-random-metric", "ladr-nano"} <= names


def test_nano_preset_is_the_committed_sweeps_pick():
    """PRESETS["nano"].policy and its T are what testbed.tune_policy picked and published."""
    from ladr_core import PRESETS

    sweep = json.loads((ROOT / "benchmarks" / "results" / "nano_policy_sweep.json").read_text())
    pick = sweep["rows"][sweep["pick"]]
    assert pick["policy"] == repr(PRESETS["nano"].policy)
    assert pick["steps"] == PRESETS["nano"].steps
    assert pick["nfe_mean"] <= sweep["max_nfe"]
    ladr = [r for r in sweep["rows"].values() if r["strategy"] == "ladr"
            and r["nfe_mean"] <= sweep["max_nfe"]]
    assert pick["score_overall"] == max(r["score_overall"] for r in ladr)


def test_writes_json_table_and_plot(tmp_path):
    out = tmp_path / "q.json"
    _quality().main(["--prompts", "2", "--strategies", "baseline-8,ladr,baseline@ladr",
                     "--steps", "16", "--json", str(out)])
    data = json.loads(out.read_text())["strategies"]
    assert list(data) == ["baseline-8", "ladr", "baseline@ladr"]
    for r in data.values():
        assert {"nfe_mean", "score_overall", "score", "wall_s", "token_forwards_mean"} <= set(r)
        assert 0.0 <= r["score_overall"] <= 1.0 and r["nfe_mean"] >= 1
    assert data["baseline-8"]["nfe_mean"] == 8
    assert data["baseline@ladr"]["steps"] == max(1, round(data["ladr"]["nfe_mean"]))
    assert out.with_suffix(".md").read_text().count("|") > 20
    assert out.with_suffix(".png").stat().st_size > 1000


def test_bad_strategy_is_named():
    with pytest.raises(SystemExit):
        _quality().main(["--strategies", "fastest", "--json", "/dev/null"])


def test_cached_strategy_runs_each_prompt_as_a_user_would(tmp_path):
    """An ML-Cache refresh schedule is shared by a batch, so the benchmark generates a cached
    strategy one prompt at a time: every item equals its own single run, and its token-forwards
    are that run's."""
    import torch

    from ladr_core import LADR, PRESETS, MLCacheConfig, load_dimoo, nano_model_path

    q = _quality()
    pipe = load_dimoo(nano_model_path(), dtype=torch.float32)
    captions = ["a red circle", "two blue squares"]
    args = {"strategy": "ladr", "steps": 16, "policy": PRESETS["nano"].policy,
            "cache": MLCacheConfig(warmup_ratio=0.1, refresh_interval=3, recompute_masked=True)}
    run = q.run_chunk(pipe, tmp_path / "c.npz", "no", captions, 0, 7, args, 0.75, 1.0)
    for i, caption in enumerate(captions):
        one = pipe.generate(caption, steps=16, cfg=0.75, temperature=1.0, seed=7 + i,
                            strategy=LADR(args["policy"]), cache=args["cache"])
        image = (one.images[0].float().clamp(0, 1) * 255).round().to(torch.uint8).numpy()
        assert (run["images"][i] == image).all()
        assert run["token_forwards"][i] == one.token_forwards
