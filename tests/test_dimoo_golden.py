"""Golden-logits parity: the native model reproduces logits produced by the official code.

tests/golden/README.md says how the files were made (official LLaDAForMultiModalGeneration,
float32, seeded random weights); make_golden.py is the script.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file

from ladr_core.dimoo.config import LLaDAConfig
from ladr_core.dimoo.model import LLaDAModel

GOLDEN = Path(__file__).resolve().parent / "golden"


@pytest.mark.parametrize(("variant", "tolerance"),
                         [("base", 1e-4), ("bias_tied", 1e-4), ("bf16_rope_lowprec", 0.0625)])
def test_native_logits_match_official(variant: str, tolerance: float) -> None:
    """fp32: <= 1e-4. bf16 (bit-identical when made): <= 2 bf16 ulps at |logit| ~ 8, leaving room
    for other CPUs' bf16 kernels."""
    path = GOLDEN / f"llada_tiny_{variant}.safetensors"
    with safe_open(str(path), "pt") as handle:
        config = json.loads(handle.metadata()["config"])
    tensors = load_file(str(path))
    ids, expected = tensors.pop("golden.input_ids"), tensors.pop("golden.logits")
    dtype = tensors["model.transformer.wte.weight"].dtype
    model = LLaDAModel(LLaDAConfig.from_dict(config), init_std=None).to(dtype).eval()
    model.load_state_dict(tensors, strict=True)  # official names, nothing missing or extra
    with torch.no_grad():
        got = model(ids)
    assert got.shape == expected.shape == (2, 12, config["vocab_size"]) and got.dtype == expected.dtype
    assert (got.float() - expected.float()).abs().max().item() <= tolerance


def test_golden_is_discriminative() -> None:
    """A wrong RoPE base must break parity, so the check above can fail."""
    path = GOLDEN / "llada_tiny_base.safetensors"
    with safe_open(str(path), "pt") as handle:
        config = json.loads(handle.metadata()["config"])
    tensors = load_file(str(path))
    ids, expected = tensors.pop("golden.input_ids"), tensors.pop("golden.logits")
    model = LLaDAModel(LLaDAConfig.from_dict({**config, "rope_theta": 10000.0}), init_std=None)
    model.load_state_dict(tensors)
    with torch.no_grad():
        assert (model(ids) - expected).abs().max().item() > 1e-2


def test_partial_pass_matches_official_ml_cache_step() -> None:
    """Cached step: the official `to_compute_mask` path (frozen) == hidden_states_partial."""
    path = GOLDEN / "llada_tiny_mlcache.safetensors"
    with safe_open(str(path), "pt") as handle:
        config = json.loads(handle.metadata()["config"])
    tensors = load_file(str(path))
    seq1, seq2 = tensors.pop("golden.seq1"), tensors.pop("golden.seq2")
    index, expected = tensors.pop("golden.compute_index"), tensors.pop("golden.logits")
    model = LLaDAModel(LLaDAConfig.from_dict(config), init_std=None).eval()
    model.load_state_dict(tensors, strict=True)
    with torch.no_grad():
        _, kv = model.hidden_states(seq1, return_kv=True)
        got = model.project(model.hidden_states_partial(seq2, index, kv))
        fresh = model(seq2).gather(1, index[..., None].expand(-1, -1, expected.shape[-1]))
    assert (got - expected).abs().max().item() <= 1e-4
    assert (fresh - expected).abs().max().item() > 1e-2  # the cached step really is stale
