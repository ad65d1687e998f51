"""The shipped DiMOO-nano checkpoint: official layout, size budget, key names, loads and draws."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open

from ladr_core import load_dimoo, nano_model_path
from ladr_core.dimoo.model.config import DiMOOIds, LLaDAConfig
from ladr_core.dimoo.model.transformer import LLaDAModel

NANO = nano_model_path()
FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
         "vqvae/config.json", "vqvae/diffusion_pytorch_model.safetensors")


def test_official_layout_files_and_size_budget():
    for name in FILES:
        assert (NANO / name).is_file(), name
    total = sum(p.stat().st_size for p in NANO.rglob("*") if p.is_file())
    assert total <= 30 * 2**20, f"nano checkpoint is {total / 2**20:.1f} MB (> 30 MB)"
    assert not list(NANO.rglob("*.bin")) and not list(NANO.rglob("*.py"))


def test_config_writes_every_id_key_and_they_fit_the_vocab():
    raw = json.loads((NANO / "config.json").read_text())
    for key in DiMOOIds.CONFIG_KEYS.values():
        assert key in raw, key
    ids = DiMOOIds.from_config_dict(raw)
    cfg = LLaDAConfig.from_dict(raw)
    ids.validate_against(cfg.vocab_size)
    assert ids.image_offset + ids.codebook_size == cfg.vocab_size  # codebook = last K rows
    vq = json.loads((NANO / "vqvae" / "config.json").read_text())
    assert vq["num_vq_embeddings"] == ids.codebook_size and vq["lookup_from_codebook"] is True
    factor = 2 ** (len(vq["block_out_channels"]) - 1)
    assert raw["default_image_size"] % factor == 0 and raw["default_image_size"] // factor >= 12


def test_tokenizer_maps_template_tokens_to_config_ids():
    from tokenizers import Tokenizer

    raw = json.loads((NANO / "config.json").read_text())
    tok = Tokenizer.from_file(str(NANO / "tokenizer.json"))
    for text in ("<system>", "</system>", "<user>", "</user>"):
        assert len(tok.encode(text).ids) == 1
    for text, key in (("<uncondition>", "uncondition_token_id"), ("<|mdm_mask|>", "mask_token_id"),
                      ("<newline>", "newline_token_id"), ("<image>", "boi_token_id")):
        assert tok.encode(text).ids == [raw[key]], text


def test_weights_carry_the_official_parameter_names():
    raw = json.loads((NANO / "config.json").read_text())
    model = LLaDAModel.from_config(raw)
    with safe_open(str(NANO / "model.safetensors"), "pt") as f:
        keys = set(f.keys())
    assert keys == set(model.state_dict())
    assert "model.transformer.blocks.0.q_proj.weight" in keys and "model.transformer.ff_out.weight" in keys


@pytest.fixture(scope="module")
def pipe():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield load_dimoo(NANO, dtype=torch.float32)
    torch.set_num_threads(threads)   # the next module runs with the worker's share again


def test_load_dimoo_generates_at_the_native_size(pipe):
    res = pipe.generate("a red circle", steps=8, strategy="ladr", seed=3)
    side = pipe.default_size
    assert res.images.shape == (1, side, side, 3) and res.tokens.shape == (1, (side // pipe.vq_factor) ** 2)
    again = pipe.generate("a red circle", steps=8, strategy="ladr", seed=3)
    assert torch.equal(res.tokens, again.tokens)
