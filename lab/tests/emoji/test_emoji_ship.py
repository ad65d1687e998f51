"""lab.emoji.ship on a tiny checkpoint (the verdict tests' pattern): the folder it writes is the
official layout with float16 weights, the guidance file's pick for that step and the step in
config.json, validation captions as calibration prompts, the license and a fitted preview table;
the pack loads it and draws. A guidance file of another step, or weights over the limit, are refused with one message,
and nothing is left behind (an existing folder stays as it was)."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open
from test_emoji_train import _codes_and_vq
from test_emoji_verdicts import TinyConfig, disc_bank  # noqa: F401 (a module-scoped fixture)

from lab.emoji import ship as S
from lab.emoji import train as T
from lab.emoji.packages import PACKAGES
from lab.emoji.verdicts import VAL_SEED, prompt_scenes
from lab.nano import train_transformer as TT
from ladr_core.dimoo import load_dimoo
from ladr_core.dimoo.model.vq import PREVIEW_TABLE_FILE

STEPS = 2


@pytest.fixture(scope="module")
def run(tmp_path_factory, disc_bank):  # noqa: F811 (the imported fixture)
    """A private cache holding a tiny VQ, the run's codes and a 2-step checkpoint."""
    torch.set_num_threads(1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LADR_EMOJI_CACHE", str(tmp_path_factory.mktemp("emoji") / "cache"))
        mp.setattr(TT, "TrainConfig", TinyConfig)
        _codes_and_vq(disc_bank, mp)
        T.stage_transformer(steps=STEPS, ckpt_every=1)
        yield T.runs_dir() / "transformer_ckpt.pt"


def _guidance(path, step: int = STEPS, pick: float = 1.5):
    path.write_text(json.dumps({"checkpoint": {"step": step}, "pick": pick}))
    return path


def _left_behind(parent) -> list[str]:
    return [p.name for p in parent.iterdir() if p.name.startswith(".")]


def test_it_writes_a_float16_folder_the_pack_loads(run, tmp_path):
    out = tmp_path / "assets" / "dimoo_emoji"
    done = S.ship(run, _guidance(tmp_path / "g.json"), out)
    assert done["step"] == STEPS and done["default_cfg"] == 1.5
    assert done["weight_bytes"] == S.weight_bytes(out) <= S.MAX_WEIGHT_BYTES
    for name in S.WEIGHT_FILES:
        with safe_open(str(out / name), "pt") as f:
            assert {f.get_slice(k).get_dtype() for k in f.keys()} == {"F16"}  # noqa: SIM118
    config = json.loads((out / "config.json").read_text())
    assert config["default_cfg"] == 1.5 and config["ladr_can_understand"] is False
    assert config[S.TESTBED_KEY]["step"] == STEPS and config[S.TESTBED_KEY]["name"] == "emoji"
    prompts = (out / "calibration_prompts.txt").read_text().splitlines()
    val = [sc.caption for sc in prompt_scenes(S.CALIBRATION_PROMPTS, "validation", VAL_SEED)]
    assert prompts == val
    license_text = (out / S.LICENSE_FILE).read_text()
    assert all(f"`{p.name}` {p.version}" in license_text for p in PACKAGES)
    assert "CC BY-SA 4.0" in license_text and f"training step {STEPS:,}" in license_text
    pipe = load_dimoo(out, dtype=torch.float32)
    assert pipe.default_cfg == 1.5 and not pipe.can_understand
    with safe_open(str(out / "vqvae" / PREVIEW_TABLE_FILE), "pt") as f:  # the fitted table
        assert int(f.metadata()["images"]) == S.PREVIEW_SEEDS * len(S.preview_captions())
        assert torch.equal(pipe.preview_table(), f.get_tensor("preview_table"))
    assert next(pipe.transformer.parameters()).dtype == torch.float32
    res = pipe.generate("a red heart", steps=2, seed=0, strategy="baseline")
    assert res.images.shape == (1, 48, 48, 3)
    assert _left_behind(out.parent) == []


def test_a_guidance_file_of_another_step_is_refused(run, tmp_path):
    out = tmp_path / "dimoo_emoji"
    with pytest.raises(SystemExit, match=f"tuned on the checkpoint at step 7, this one is at "
                                         f"step {STEPS}"):
        S.ship(run, _guidance(tmp_path / "g.json", step=7), out)
    assert not out.exists() and _left_behind(tmp_path) == []
    with pytest.raises(SystemExit, match="no guidance results"):
        S.ship(run, tmp_path / "missing.json", out)


def test_weights_over_the_limit_are_refused_and_the_old_folder_kept(run, tmp_path):
    out = tmp_path / "dimoo_emoji"
    out.mkdir()
    (out / "config.json").write_text("{}")
    with pytest.raises(SystemExit, match=r"MB, over the 0\.001 MB a built-in model may hold"):
        S.ship(run, _guidance(tmp_path / "g.json"), out, limit=1000)
    assert [p.name for p in out.iterdir()] == ["config.json"]
    assert _left_behind(tmp_path) == []
    S.ship(run, _guidance(tmp_path / "g.json"), out)  # within the limit: replaces it
    assert (out / "model.safetensors").is_file() and _left_behind(tmp_path) == []


def test_the_license_names_what_the_vq_saw(run, tmp_path):
    out = tmp_path / "dimoo_emoji"
    S.ship(run, _guidance(tmp_path / "g.json"), out, vq_styles=("noto", "twemoji"))
    text = " ".join((out / S.LICENSE_FILE).read_text().split())
    assert "the VQ on Noto Emoji, Twemoji pictures" in text and "OpenMoji" not in text
    with pytest.raises(SystemExit, match="--vq-styles apple: name the styles"):
        S.ship(run, _guidance(tmp_path / "g.json"), out, vq_styles=("apple",))


def test_a_checkpoint_without_its_codes_is_refused(tmp_path):
    ckpt = tmp_path / "transformer_ckpt.pt"
    ckpt.write_bytes(b"x")
    with pytest.raises(SystemExit, match="codes.pt beside it"):
        S.ship(ckpt, _guidance(tmp_path / "g.json"), tmp_path / "out")
