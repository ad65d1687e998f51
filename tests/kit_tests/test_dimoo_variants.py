"""tests.kit.variants: models in the loader's layouts (random weights for lab/benchmarks/gpu_check's
8B shape; a checkpoint's own weights for its GPU-against-CPU checks)."""

from __future__ import annotations

import pytest
import torch

from ladr_core.dimoo.model.config import LLaDAConfig
from ladr_core.dimoo.weights import fp8
from tests.kit.variants import build_variant

TINY = dict(d_model=32, n_heads=4, n_kv_heads=2, n_layers=2, mlp_hidden_size=48, vocab_size=96,
            embedding_size=96, max_sequence_length=64)


def _config() -> LLaDAConfig:
    return LLaDAConfig(**TINY)


def test_fp8_variant_stores_block_linears_in_fp8_and_runs() -> None:
    model = build_variant(_config(), "cpu", "fp8", dtype=torch.float32)
    q = model.model.transformer.blocks[0].ff_proj
    assert q.weight.dtype == torch.float8_e4m3fn and q.weight_scale.dtype == torch.float32
    assert model.model.transformer.wte.weight.dtype == torch.float32
    w = fp8.dequantize(q.weight, q.weight_scale)
    assert 0.01 < w.std().item() < 0.03  # N(0, 0.02) survived the quantization
    ids = torch.randint(0, 96, (2, 10))
    with torch.no_grad():
        logits = model(ids)
    assert logits.shape == (2, 10, 96) and torch.isfinite(logits).all()


def test_low_vram_variant_streams_blocks_and_matches_the_same_weights_resident() -> None:
    from ladr_core.dimoo.model.offload import unstream_blocks

    model = build_variant(_config(), "cpu", "low_vram", dtype=torch.float32, seed=3)
    assert model._block_stream is not None and model.device == torch.device("cpu")
    ids = torch.randint(0, 96, (1, 12))
    with torch.no_grad():
        streamed = model(ids)
    unstream_blocks(model)
    assert model._block_stream is None
    with torch.no_grad():
        assert torch.equal(model(ids), streamed)
    again = build_variant(_config(), "cpu", "low_vram", dtype=torch.float32, seed=3)
    with torch.no_grad():
        assert torch.equal(again(ids), streamed)  # the seed fixes the weights


def test_unknown_variant_is_refused_naming_the_choices() -> None:
    with pytest.raises(ValueError, match=r"mode must be one of \['fp8', 'low_vram', 'comfy_fp8', "
                       r"'int8', 'q8_0', 'q4_k_m'\]"):
        build_variant(_config(), "cpu", "int4")


WIDE = dict(TINY, d_model=256, mlp_hidden_size=512)  # rows that fit the 256-weight K blocks


@pytest.mark.parametrize(("mode", "stored", "bits"), [
    ("comfy_fp8", torch.float8_e4m3fn, 8.0), ("int8", torch.int8, 8.0),
    ("q8_0", torch.uint8, 8.5), ("q4_k_m", torch.uint8, 4.5)])
def test_quantized_variants_store_their_format_and_run(mode: str, stored: torch.dtype,
                                                       bits: float) -> None:
    model = build_variant(LLaDAConfig(**WIDE), "cpu", mode, dtype=torch.float32)
    q = model.model.transformer.blocks[0].q_proj  # not a "more bits" layer choice: Q4_K
    assert q.weight.dtype == stored
    assert 8 * q.weight.numel() * q.weight.element_size() / (256 * 256) == bits
    assert model.model.transformer.blocks[1].attn_norm.weight.dtype == torch.float32
    ids = torch.randint(0, 96, (2, 10))
    with torch.no_grad():
        logits = model(ids)
    assert logits.shape == (2, 10, 96) and torch.isfinite(logits).all()
    assert float(logits.std()) > 0  # random weights, not zeros


@pytest.mark.parametrize("mode", ["fp8", "low_vram", "comfy_fp8", "int8", "q8_0", "q4_k_m"])
def test_a_variant_from_a_source_holds_its_weights_whatever_the_compute_dtype(mode: str) -> None:
    """Built from a model's state dict, a layout quantizes those float32 values (not random
    ones): the same stored bytes in float32 and in bf16 compute, and logits nearer the
    source's than those of the layout with random weights."""
    source = build_variant(LLaDAConfig(**WIDE), "cpu", "low_vram", dtype=torch.float32, seed=5)
    from ladr_core.dimoo.model.offload import unstream_blocks

    unstream_blocks(source)
    state = source.state_dict()
    f32 = build_variant(LLaDAConfig(**WIDE), "cpu", mode, dtype=torch.float32, source=state)
    b16 = build_variant(LLaDAConfig(**WIDE), "cpu", mode, dtype=torch.bfloat16, source=state)
    q32 = f32.model.transformer.blocks[0].q_proj.weight
    q16 = b16.model.transformer.blocks[0].q_proj.weight
    if q32.dtype in (torch.float32, torch.bfloat16):  # not quantized (the streamed layout)
        assert torch.equal(q32, state["model.transformer.blocks.0.q_proj.weight"])
    else:
        assert q32.dtype == q16.dtype and torch.equal(q32.view(torch.uint8), q16.view(torch.uint8))
    other = build_variant(LLaDAConfig(**WIDE), "cpu", mode, dtype=torch.float32, seed=6)
    ids = torch.randint(0, 96, (1, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want, got, random = source(ids), f32(ids), other(ids)
    assert float((got - want).abs().mean()) < 0.5 * float((random - want).abs().mean())
