"""GGML block formats (ggml.py): bit-exact against the gguf package's reference decoders, and
round-trip errors against float that order the formats as their bits do."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType, quants

from ladr_core.dimoo.weights import ggml

TYPES = ["Q8_0", "Q4_K", "Q5_K", "Q6_K", "F16", "BF16", "F32"]


def _weights(rows: int = 8, n: int = 512, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(rows, n, generator=g) * 0.02
    w[1] = 0.0  # a zero row: scales 0, no NaN
    w[2, 7] = 0.5  # an outlier in one block
    w[3] = w[3].abs()  # a row without negative values (K-quant mins at 0)
    return w


@pytest.mark.parametrize("name", TYPES)
def test_dequantize_equals_the_gguf_reference_on_quantized_weights(name: str) -> None:
    w = _weights()
    data = ggml.quantize(w, name)
    assert data.dtype == torch.uint8 and data.shape == (8, ggml.row_bytes(name, 512))
    ref = quants.dequantize(data.numpy(), GGMLQuantizationType[name])
    got = ggml.dequantize(data, name, 512)
    np.testing.assert_array_equal(got.numpy(), ref)
    assert not got[1].any()  # the zero row decodes to zeros


@pytest.mark.parametrize("name", ["Q8_0", "Q4_K", "Q5_K", "Q6_K"])
def test_every_bit_of_a_random_block_decodes_like_the_reference(name: str) -> None:
    """Random bytes exercise every scale, min and code bit; fp16 fields are set finite."""
    per, size = ggml.block_bytes(name)
    g = torch.Generator().manual_seed(1)
    data = torch.randint(0, 256, (16, size), generator=g, dtype=torch.uint8)
    halves = torch.rand(16, 2, generator=g).to(torch.float16).view(torch.uint8).view(16, 4)
    fields = {"Q8_0": [0], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [size - 2]}[name]
    for i, at in enumerate(fields):
        data[:, at:at + 2] = halves[:, 2 * i:2 * i + 2]
    ref = quants.dequantize(data.numpy(), GGMLQuantizationType[name])
    np.testing.assert_array_equal(ggml.dequantize(data, name, per).numpy(), ref)


def test_round_trip_errors_follow_the_bits_per_weight() -> None:
    w = torch.randn(64, 1024, generator=torch.Generator().manual_seed(2)) * 0.02
    err = {n: float((ggml.dequantize(ggml.quantize(w, n), n, 1024) - w).norm() / w.norm())
           for n in ("Q8_0", "Q6_K", "Q5_K", "Q4_K")}
    assert err["Q8_0"] < 0.01 < err["Q6_K"] < 0.03 < err["Q5_K"] < 0.05 < err["Q4_K"] < 0.1
    bits = {n: 8 * ggml.row_bytes(n, 1024) / 1024 for n in err}
    assert bits == {"Q8_0": 8.5, "Q6_K": 6.5625, "Q5_K": 5.5, "Q4_K": 4.5}


def test_dequantize_casts_to_the_requested_dtype_and_rows_decode_alone() -> None:
    w = _weights()
    data = ggml.quantize(w, "Q4_K")
    full = ggml.dequantize(data, "Q4_K", 512, torch.bfloat16)
    assert full.dtype == torch.bfloat16
    torch.testing.assert_close(ggml.dequantize(data[2:5], "Q4_K", 512, torch.bfloat16),
                               full[2:5], rtol=0, atol=0)


def test_a_row_that_is_not_a_whole_number_of_blocks_is_refused() -> None:
    with pytest.raises(ValueError, match="Q4_K needs rows of a multiple of 256 weights, got 128"):
        ggml.quantize(torch.zeros(2, 128), "Q4_K")


@pytest.mark.parametrize("name", TYPES)
def test_quantize_and_dequantize_build_every_tensor_on_the_input_device(name: str) -> None:
    """On the shape-only 'meta' device a tensor made without ``device=`` (a CPU ``arange``)
    meets a meta tensor and raises, as it would meet a CUDA tensor on a GPU (Q5_K / Q6_K did)."""
    w = torch.empty(4, 512, device="meta")
    data = ggml.quantize(w, name)
    assert data.device.type == "meta" and data.shape == (4, ggml.row_bytes(name, 512))
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        out = ggml.dequantize(data, name, 512, dtype)
        assert out.device.type == "meta" and out.shape == (4, 512) and out.dtype == dtype


def test_q8_0_into_float16_equals_the_float32_route_bit_for_bit() -> None:
    """fp16 d times int8 q rounded once in float16 is the float32 product (exact) rounded to
    float16: the same values, scales from subnormal to near the fp16 maximum included."""
    g = torch.Generator().manual_seed(3)
    data = torch.randint(0, 256, (64, 34), generator=g, dtype=torch.uint8)
    d = torch.cat([torch.tensor([6e-8, 1e-5, 3.0, 500.0, 65000.0, -2.0]),
                   torch.randn(58, generator=g)]).to(torch.float16)
    data[:, :2] = d.view(torch.uint8).view(64, 2)
    via32 = ggml.dequantize(data, "Q8_0", 32, torch.float32).to(torch.float16)
    direct = ggml.dequantize(data, "Q8_0", 32, torch.float16)
    assert direct.dtype == torch.float16
    assert torch.equal(direct.view(torch.int16), via32.view(torch.int16))  # infs included
