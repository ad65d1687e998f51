"""lab/studies/quality.py end to end on the shipped nano model (2 prompts, cheap strategies)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from support import ROOT
from support.scripts import run_script

from lab.nano import scenes
from ladr_core import LADR, MLCacheConfig, load_dimoo, nano_model_path


def test_strategy_table_covers_the_issue_list():
    names = set(run_script("lab.studies.quality", "--list").stdout.split())
    assert {"baseline-8", "baseline-16", "baseline-32", "baseline-64", "ladr", "ladr-delayed",
            "prophet", "mlcache", "ladr+mlcache", "ladr-non-neighbors", "ladr-random-candidates",
            "ladr-confidence", "ladr-random-metric", "ladr-nano"} <= names


@pytest.mark.committed_result("lab/results/nano_policy_sweep.json")
def test_nano_preset_is_the_committed_sweeps_pick():
    """PRESETS["nano"].policy is what lab.nano.tune_policy picked and published (at T 128, the
    steps lab.studies.quality runs it at)."""
    from lab.studies.quality import STEPS
    from ladr_core import PRESETS

    sweep = json.loads((ROOT / "lab" / "results" / "nano_policy_sweep.json").read_text())
    pick = sweep["rows"][sweep["pick"]]
    assert pick["policy"] == repr(PRESETS["nano"].policy)
    assert pick["steps"] == STEPS["nano"]
    assert pick["nfe_mean"] <= sweep["max_nfe"]
    ladr = [r for r in sweep["rows"].values() if r["strategy"] == "ladr"
            and r["nfe_mean"] <= sweep["max_nfe"]]
    assert pick["score_overall"] == max(r["score_overall"] for r in ladr)


def test_writes_json_table_and_plot(tmp_path):
    out = tmp_path / "q.json"
    run_script("lab.studies.quality", "--prompts", "2", "--strategies",
               "baseline-8,ladr,baseline@ladr", "--steps", "16", "--json", str(out))
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
    refused = run_script("lab.studies.quality", "--strategies", "fastest", "--json", "/dev/null",
                         ok=False)
    assert refused.returncode == 2 and "fastest" in refused.stderr


def test_cached_strategy_runs_each_prompt_as_a_user_would(tmp_path):
    """An ML-Cache refresh schedule is shared by a batch, so the benchmark generates a cached
    strategy one prompt at a time: every stored image equals its own single run with the
    preset's cache (LADR nano + MLCacheConfig.ladr(), test item i with seed TEST_IMAGE_SEED + i)
    at the steps the script runs the preset at (STEPS["nano"]: a preset brings no T of its own)."""
    from lab.studies.quality import STEPS
    out = tmp_path / "c.json"
    run_script("lab.studies.quality", "--prompts", "2", "--batch", "2", "--strategies",
               "ladr-nano+mlcache", "--threads", "1", "--json", str(out))
    with np.load(tmp_path / "c_runs" / "test.npz") as z:  # lab/studies/run_store.py's layout
        images, tokens, token_forwards = (z[f"ladr-nano+mlcache/{f}"]
                                          for f in ("00000/images", "00000/tokens",
                                                    "token_forwards"))
    pipe = load_dimoo(nano_model_path(), dtype=torch.float32)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the script's: float sums (the VQ decode) follow the thread count
    try:
        singles = [pipe.generate(scenes.caption_for(spec), cfg=pipe.default_cfg, temperature=1.0,
                                 seed=scenes.TEST_IMAGE_SEED + i, strategy=LADR.preset("nano"),
                                 steps=STEPS["nano"], cache=MLCacheConfig.ladr())
                   for i, spec in enumerate(scenes.quality_test_specs(2))]
    finally:
        torch.set_num_threads(threads)
    for i, one in enumerate(singles):
        image = (one.images[0].float().clamp(0, 1) * 255).round().to(torch.uint8).numpy()
        assert (images[i] == image).all()
        assert (tokens[i] == one.tokens[0].numpy()).all()
        assert token_forwards[i] == one.token_forwards


def test_reuse_only_scores_the_stored_chunks_again(tmp_path):
    """A run's stored chunks (one npz per set) give the same table again without generating."""
    args = ("--prompts", "3", "--batch", "2", "--strategies", "baseline-4,ladr", "--steps", "8")
    run_script("lab.studies.quality", *args, "--json", str(tmp_path / "q.json"))
    run_script("lab.studies.quality", *args, "--json", str(tmp_path / "r.json"),
               "--runs", str(tmp_path / "q_runs"), "--reuse", "only")
    first, again = (json.loads((tmp_path / f).read_text()) for f in ("q.json", "r.json"))
    assert again["strategies"] == first["strategies"] and again["compare"] == first["compare"]
    with np.load(tmp_path / "q_runs" / "test.npz") as z:
        assert z["ladr/lo"].tolist() == [0, 2] and z["ladr/passed"].shape == (3,)
        assert z["ladr/00000/tokens"].shape == (2, 144) and z["ladr/00002/images"].shape[0] == 1


@pytest.mark.committed_result("lab/results/quality_test_runs/test.npz")
def test_committed_runs_hold_the_reports_verdicts():
    """The stored chunks of the test set hold every verdict and NFE quality_test.json and
    quality_ablation.json report, in prompt order, and the sample sheets' images."""
    with np.load(ROOT / "lab" / "results" / "quality_test_runs" / "test.npz") as z:
        stored = {f: z[f] for f in z.files}
    for report in ("quality_test.json", "quality_ablation.json"):
        doc = json.loads((ROOT / "lab" / "results" / report).read_text())
        for name, row in doc["strategies"].items():
            n = len(row["passed"])
            lo, size = stored[f"{name}/lo"], stored[f"{name}/size"]  # contiguous from prompt 0
            assert lo.tolist() == np.cumsum([0, *size[:-1]]).tolist() and size.sum() >= n
            assert stored[f"{name}/passed"][:n].tolist() == row["passed"]
            assert stored[f"{name}/nfe"][:n].tolist() == row["nfe"]
            assert stored[f"{name}/00000/images"].shape[0] == 7
