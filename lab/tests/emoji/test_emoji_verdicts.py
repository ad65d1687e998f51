"""The verdict harness (lab.emoji.verdicts) wired end to end on a tiny checkpoint: the gate
refuses, or every section runs with paired intervals; a training checkpoint exports to a
folder the pack loads."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from test_emoji_train import _codes_and_vq

from lab.emoji import judge as J
from lab.emoji import train as T
from lab.emoji import verdict_runs as R
from lab.emoji import verdicts as V
from lab.emoji.bank import FULL, SPRITE, STYLES, Bank
from lab.emoji.scenes import CATEGORIES
from lab.emoji.vocab import VOCAB
from lab.nano import train_transformer as TT
from ladr_core.dimoo import load_dimoo


@dataclasses.dataclass(frozen=True)
class TinyConfig(TT.TrainConfig):
    d_model: int = 16
    n_layers: int = 1
    n_heads: int = 2
    mlp_hidden_size: int = 32


@pytest.fixture(scope="module")
def disc_bank():
    from fake_packages import colour

    def disc(size: int, i: int) -> np.ndarray:
        yy, xx = np.mgrid[0:size, 0:size] + 0.5
        out = np.zeros((size, size, 4), dtype=np.uint8)
        out[(yy - size / 2) ** 2 + (xx - size / 2) ** 2 <= (size / 2) ** 2] = (*colour(i), 255)
        return out

    full = np.stack([disc(FULL, i) for i in range(len(VOCAB))])
    sprites = np.stack([disc(SPRITE, i) for i in range(len(VOCAB))])
    return Bank(STYLES, np.stack([full] * len(STYLES)), np.stack([sprites] * len(STYLES)))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, disc_bank):
    """One tiny checkpoint (a 1-layer, 16-wide transformer, 2 steps) and a briefly trained
    judge for the module, in a private cache."""
    torch.set_num_threads(1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LADR_EMOJI_CACHE", str(tmp_path_factory.mktemp("emoji") / "cache"))
        mp.setattr(TT, "TrainConfig", TinyConfig)
        _codes_and_vq(disc_bank, mp)
        T.stage_transformer(steps=2, ckpt_every=1)
        judge, _ = J.train_judge(disc_bank, steps=20, batch=32)
        yield load_dimoo(T.model_dir(), dtype=torch.float32), judge


def _opts(gate: float) -> dict:
    return {"prompts": len(CATEGORIES), "val_prompts": 2, "steps": 4, "cfg": 2.0, "batch": 5,
            "gate": gate, "seed0": 3, "tune": ["ladr:tau=0.8,steps=4", "ladr:tau=0.9,steps=4"],
            "strengths": [0.5]}


def _ci_holds(c: dict) -> bool:
    return c["lo"] - 1e-9 <= c["diff"] <= c["hi"] + 1e-9


def test_the_gate_refuses_to_compare_below_its_threshold(tiny, disc_bank):
    pipe, judge = tiny
    doc = V.run(pipe, judge, disc_bank, T.model_dir(), _opts(gate=1.01), log=lambda *a: None)
    g = doc["gate"]
    assert not g["passed"] and "no sampler is compared" in g["message"]
    assert g["single_object_prompts"] == 1 and 0.0 <= g["baseline_single_object"] <= 1.0
    assert not {"t2i", "i2i", "inpaint", "calibration"} & set(doc)
    assert len(doc["baseline"]["passed"]) == len(CATEGORIES)
    assert doc["_sheet"].shape == (min(V.SHEET, len(CATEGORIES)), 48, 48, 3)


def test_past_the_gate_every_section_runs_paired_on_the_test_prompts(tiny, disc_bank):
    pipe, judge = tiny
    opts = _opts(gate=0.0)
    doc = V.run(pipe, judge, disc_bank, T.model_dir(), opts, log=lambda *a: None)
    n = len(CATEGORIES)
    assert doc["tuned"]["pick"] in opts["tune"]
    names = set(R.t2i_table(4, doc["tuned"]["pick"], (None, 1)))
    t2i = doc["t2i"]["settings"]
    assert names <= set(t2i) and "calibrated" in t2i and "ladr-tuned" in t2i
    for name, r in t2i.items():        # every setting's official sampler at its forwards
        assert len(r["passed"]) == n
        if not name.startswith("baseline"):
            assert f"baseline-{max(1, round(r['nfe_mean']))}" in t2i
    assert doc["t2i"]["compare"] and all(_ci_holds(c["diff"]["overall"])
                                         for c in doc["t2i"]["compare"])
    for route in ("picture", "token"):
        rows = doc["i2i"][route]["0.5"]["settings"]
        assert set(R.EDIT_SETTINGS) <= set(rows)
        assert all(0.0 <= r["kept_mean"] <= 1.0 for r in rows.values())
        assert all(_ci_holds(c["overall_diff"]) for c in doc["i2i"][route]["0.5"]["compare"])
    paint = doc["inpaint"]["settings"]
    assert paint["baseline-64"]["known_unchanged"] == n and 0 < doc["inpaint"]["mask_share_mean"] < 1
    assert "not run" in doc["understanding"]


def test_object_masks_cover_one_object_and_a_token_around_it():
    scenes = V.prompt_scenes(10, "test", 1)
    masks = R.object_masks(scenes, 0, 48)
    for sc, m in zip(scenes, masks, strict=True):
        covered = [p for p in sc.placed if m[p.y:p.y + 16, p.x:p.x + 16].all()]
        assert len(covered) >= 1 and 16 * 16 <= m.sum() <= 24 * 24


def test_a_training_checkpoint_exports_to_the_folder_the_stage_saves(tiny, tmp_path):
    pipe, _ = tiny
    info = T.export_checkpoint(T.runs_dir() / "transformer_ckpt.pt", tmp_path / "out")
    assert info["step"] == 2 and info["history"]
    other = load_dimoo(tmp_path / "out", dtype=torch.float32)
    a = pipe.generate("a red heart", steps=3, seed=1, strategy="baseline").tokens
    b = other.generate("a red heart", steps=3, seed=1, strategy="baseline").tokens
    assert torch.equal(a, b)


def test_prompts_are_test_split_and_cycle_the_categories():
    from lab.emoji.scenes import spec_split

    scenes = V.prompt_scenes(15, "test", V.TEST_SEED)
    assert [sc.spec.category for sc in scenes] == list(CATEGORIES) * 3
    assert all(spec_split(sc.spec) == "test" for sc in scenes
               if sc.spec.category not in ("single_object", "counting"))
    assert np.all([sc.caption for sc in scenes])


def test_the_guidance_sweep_picks_the_best_validation_scale(tiny, monkeypatch):
    from lab.emoji import guidance as G

    pipe, judge = tiny
    monkeypatch.setattr(G, "SETTINGS", {k: {**v, "steps": 3} for k, v in G.SETTINGS.items()})
    val = V.prompt_scenes(len(CATEGORIES), "validation", V.VAL_SEED)
    doc = G.sweep(pipe, judge, val, [0.0, 2.0], batch=5, log=lambda row: None)
    assert [r["cfg"] for r in doc["rows"]] == [0.0, 2.0]
    means = {r["cfg"]: r["mean_overall"] for r in doc["rows"]}
    assert means[doc["pick"]] == max(means.values())
    if means[0.0] == means[2.0]:
        assert doc["pick"] == 0.0          # a tie: the smaller scale


def test_a_tuned_scale_is_used_only_on_the_checkpoint_it_was_tuned_on(tmp_path):
    import json

    from lab.emoji.guidance import tuned_cfg

    path = tmp_path / "g.json"
    with pytest.raises(SystemExit, match="no guidance results"):
        tuned_cfg(path, 5)
    path.write_text(json.dumps({"checkpoint": {"step": 5}, "pick": 1.5}))
    assert tuned_cfg(path, 5) == 1.5 and tuned_cfg(path, None) == 1.5
    with pytest.raises(SystemExit, match="tuned on the checkpoint at step 5, this one is at step 7"):
        tuned_cfg(path, 7)


def test_runs_of_disjoint_sections_merge_into_the_full_document(tiny, disc_bank):
    pipe, judge = tiny
    env = {"env": {"git_commit": "abc"}, "command": "c", "checkpoint": {"step": 2},
           "uncommitted_emoji_code": []}
    opts = _opts(gate=0.0) | {"tune": ["ladr:tau=0.8,steps=4"]}
    runs = ({"sections": ["t2i"]}, {"sections": ["i2i", "inpaint"], "routes": ["picture"]},
            {"sections": ["i2i"], "routes": ["token"]})
    parts = [env | V.run(pipe, judge, disc_bank, T.model_dir(), opts | r, log=lambda *a: None)
             for r in runs]
    merged = V.merge(parts)
    assert sorted(merged["sections"]) == sorted(["t2i", "inpaint", "i2i:picture", "i2i:token"])
    assert merged["t2i"] is parts[0]["t2i"] and merged["inpaint"] is parts[1]["inpaint"]
    assert merged["i2i"]["token"] is parts[2]["i2i"]["token"]
    assert merged["i2i"]["picture"] is parts[1]["i2i"]["picture"]
    assert "t2i" not in parts[1] and "i2i" not in parts[0] and "picture" not in parts[2]["i2i"]
    assert merged["section_commits"] == dict.fromkeys(merged["sections"], "abc")
    with pytest.raises(SystemExit, match="a section was run twice"):
        V.merge([parts[0], parts[0]])
    other = parts[1] | {"baseline": {**parts[1]["baseline"], "passed": []}}
    with pytest.raises(SystemExit, match="differ in 'baseline'"):
        V.merge([parts[0], other])
