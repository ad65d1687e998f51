"""The shipped DiMOO-emoji checkpoint (``emoji_model_path()``, written by ``python -m
lab.emoji.ship``): the official layout, its weights stored in float16 within the issue's 5 MB and
computed in the loader's dtype, the tuned guidance scale and the training step in config.json,
its license file, calibration prompts and fitted preview colours; it loads and draws 48 px pictures on a CPU and refuses
to answer questions. Nothing here reads what the weights draw: they are regenerated."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open

import ladr_core
from ladr_core import InputError, emoji_model_path, load_dimoo
from ladr_core.calibrate import default_prompts
from ladr_core.dimoo.model.transformer import LLaDAModel

EMOJI = emoji_model_path()
FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
         "vqvae/config.json", "vqvae/diffusion_pytorch_model.safetensors", "LICENSE.md",
         "calibration_prompts.txt", "vqvae/preview_table.safetensors")
WEIGHT_BUDGET = 5_000_000  # issue 51 item 7: a built-in's weights fit in 5 MB
pytestmark = pytest.mark.skipif(not (EMOJI / "config.json").is_file(),
                                reason="dimoo-emoji is not shipped in this checkout")


def _raw() -> dict:
    return json.loads((EMOJI / "config.json").read_text())


def test_official_layout_and_float16_weights_within_the_budget() -> None:
    for name in FILES:
        assert (EMOJI / name).is_file(), name
    weights = list(EMOJI.rglob("*.safetensors"))  # the preview table counts too
    assert sum(p.stat().st_size for p in weights) <= WEIGHT_BUDGET
    assert not list(EMOJI.rglob("*.bin")) and not list(EMOJI.rglob("*.py"))
    for path in [p for p in weights if p.name != "preview_table.safetensors"]:
        with safe_open(str(path), "pt") as f:
            dtypes = {f.get_slice(k).get_dtype() for k in f.keys()}  # noqa: SIM118
        assert dtypes == {"F16"}, (path.name, dtypes)
    with safe_open(str(EMOJI / "model.safetensors"), "pt") as f:
        assert set(f.keys()) == set(LLaDAModel.from_config(_raw()).state_dict())


def test_config_says_what_it_was_tuned_for_and_that_it_only_draws() -> None:
    raw = _raw()
    assert ladr_core.emoji_default_cfg() == raw["default_cfg"] >= 0
    assert raw["ladr_can_understand"] is False and raw["ladr_can_edit"] is False
    testbed = raw["ladr_testbed"]
    assert testbed["name"] == "emoji" and isinstance(testbed["step"], int) and testbed["step"] > 0


def test_license_names_the_artwork_and_the_weights_license() -> None:
    text = (EMOJI / "LICENSE.md").read_text()
    for words in ("Noto Emoji", "Apache", "Twemoji", "CC BY 4.0", "CC BY-SA 4.0",
                  f"training step {_raw()['ladr_testbed']['step']:,}"):
        assert words in text, words
    assert "Apple or Facebook emoji artwork" in text


def test_calibration_uses_the_checkpoints_own_prompts() -> None:
    prompts, source = default_prompts(EMOJI)
    assert source == str(EMOJI / "calibration_prompts.txt") and len(prompts) >= 16
    vocab = set(json.loads((EMOJI / "tokenizer.json").read_text())["model"]["vocab"])
    assert all(word in vocab for p in prompts for word in p.split()), "a word it never saw"


@pytest.fixture(scope="module")
def pipe():
    torch.set_num_threads(1)
    return load_dimoo(EMOJI, dtype=torch.float32)


def test_load_dimoo_computes_in_float32_and_draws_48_px(pipe) -> None:
    assert {p.dtype for p in pipe.transformer.parameters()} == {torch.float32}
    assert {p.dtype for p in pipe.vq.parameters()} == {torch.float32}
    res = pipe.generate("a red heart", steps=8, strategy="baseline", seed=3)
    side = pipe.default_size
    assert side == 48 and res.images.shape == (1, side, side, 3)
    assert res.tokens.shape == (1, (side // pipe.vq_factor) ** 2)
    assert float(res.images.std()) > 0.01  # a picture, not a flat fill
    again = pipe.generate("a red heart", steps=8, strategy="baseline", seed=3)
    assert torch.equal(res.tokens, again.tokens)


def test_it_refuses_to_answer_naming_the_model(pipe) -> None:
    assert not pipe.can_understand
    with pytest.raises(InputError) as err:
        pipe.prepare_understand(torch.rand(1, 48, 48, 3), "what is it?")
    assert err.value.name == "model" and "cannot answer" in err.value.problem
