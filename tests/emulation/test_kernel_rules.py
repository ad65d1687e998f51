"""Kernels as the card would take them (tests/kit/cuda_emu/rules.py, attention.py): ``_scaled_mm``
and ``_int_mm`` refused with torch's message where the card's kernel refuses, the attention
backend torch would pick, fallbacks reported with their site, each weight layout's fast path
engaged on the cards that have it, and a card without bf16 given a working dtype."""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from ladr_core.dimoo import load_dimoo, save
from nodes.host import pick_dtype
from tests.kit.cuda_emu import CARDS, CudaEmulationError, emulated_cuda
from tests.kit.cuda_emu.attention import choose
from tests.kit.tiny_checkpoint import write_tiny_checkpoint

E4, E5 = torch.float8_e4m3fn, torch.float8_e5m2
HERE = "tests/emulation/test_kernel_rules.py"


def _fp8(rows: int, cols: int, dtype: torch.dtype = E4) -> torch.Tensor:
    return torch.randn(rows, cols, device="cuda").to(dtype)


def _scaled(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    one = torch.ones((), device="cuda")
    return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.float32)


# (card, mat1, mat2 as made, refused message or None) -- mat2 [N, K] row-major, given as .t()
SCALED = [("rtx4090", (32, 64), (48, 64), E4, None),
          ("h100", (5, 64), (48, 64), E5, None),  # M is free; e4m3 x e5m2 is fine
          ("rtx3060", (32, 64), (48, 64), E4, "compute capability >= 9.0 or 8.9"),
          ("rtx4090", (32, 40), (48, 40), E4, "trailing dimension of mat1 to be divisible by 16"),
          ("rtx4090", (32, 64), (40, 64), E4, "mat2 shape (64x40) must be divisible by 16")]


@pytest.mark.parametrize(("name", "a", "b", "b_dtype", "refused"), SCALED)
def test_scaled_mm_is_taken_or_refused_as_the_card_would(name, a, b, b_dtype, refused) -> None:  # noqa: ANN001
    with emulated_cuda(card=name) as emu:
        x, w = _fp8(*a), _fp8(*b, dtype=b_dtype)
        if refused is None:
            assert _scaled(x, w.t()).shape == (a[0], b[0])
            assert sum(n for (k, _), n in emu.kernels.items() if k == "_scaled_mm") == 1
            return
        with pytest.raises(RuntimeError, match=refused.replace("(", r"\(").replace(")", r"\)")):
            _scaled(x, w.t())
        (what, where), = emu.fallbacks
        assert what.startswith("_scaled_mm refused: ") and where.startswith(f"{HERE}:")


def test_scaled_mm_refuses_a_row_major_mat2_and_two_e5m2_matrices() -> None:
    with emulated_cuda(card="h100"):
        with pytest.raises(RuntimeError, match="row-major and column-major"):
            _scaled(_fp8(32, 64), _fp8(64, 48))  # [K, N] contiguous: row-major
        with pytest.raises(RuntimeError, match="two Float8_e5m2 matrices"):
            _scaled(_fp8(32, 64, E5), _fp8(48, 64, E5).t())


@pytest.mark.parametrize(("m", "k", "n", "refused"), [
    (17, 64, 48, None), (16, 64, 48, "self.size(0) needs to be greater than 16, but got 16"),
    (32, 60, 48, "self.size(1) needs to be greater than 0 and a multiple of 8, but got 60"),
    (32, 64, 44, "mat2.size(1) needs to be greater than 0 and a multiple of 8, but got 44")])
def test_int_mm_takes_m_over_16_and_k_n_multiples_of_8(m: int, k: int, n: int, refused) -> None:  # noqa: ANN001
    with emulated_cuda(card="rtx2080"):
        a = torch.ones(m, k, dtype=torch.int8, device="cuda")
        b = torch.ones(n, k, dtype=torch.int8, device="cuda").t()
        if refused is None:
            assert torch.equal(torch._int_mm(a, b).cpu(), torch.full((m, n), k, dtype=torch.int32))
        else:
            with pytest.raises(RuntimeError, match=refused.replace("(", r"\(").replace(")", r"\)")):
                torch._int_mm(a, b)


def _qkv(dtype: torch.dtype, hd: int = 64, kv_heads: int = 8) -> tuple:
    q = torch.empty(1, 8, 16, hd, dtype=dtype, device="meta")
    k = torch.empty(1, kv_heads, 16, hd, dtype=dtype, device="meta")
    return q, k, k


MASK = torch.empty(16, 16, dtype=torch.bool, device="meta")
# (card, dtype, head size, kv heads, mask, backend)
CHOICES = [("rtx4090", torch.bfloat16, 128, 8, None, "flash"),
           ("rtx4090", torch.bfloat16, 128, 2, None, "flash"),  # flash groups heads
           ("rtx4090", torch.bfloat16, 128, 8, MASK, "efficient"),
           ("rtx4090", torch.bfloat16, 128, 2, MASK, "math"),  # mask and grouped heads
           ("rtx4090", torch.float32, 128, 8, None, "efficient"),
           ("rtx4090", torch.float32, 128, 2, None, "math"),
           ("rtx4090", torch.bfloat16, 264, 8, None, "efficient"),  # past flash's 256
           ("rtx4090", torch.bfloat16, 260, 8, None, "math"),  # and no multiple of 8
           ("rtx2080", torch.float16, 128, 8, None, "efficient"),  # no flash before sm 8.0
           ("rtx2080", torch.bfloat16, 128, 8, None, "math"),  # no bf16 tensor cores
           ("h100", torch.bfloat16, 128, 8, MASK, "efficient"),
           ("h100", torch.bfloat16, 160, 2, MASK, "math")]


@pytest.mark.parametrize(("name", "dtype", "hd", "kv", "mask", "backend"), CHOICES)
def test_the_attention_backend_is_the_one_torch_picks_on_the_card(name, dtype, hd, kv, mask,
                                                                  backend) -> None:  # noqa: ANN001
    q, k, v = _qkv(dtype, hd, kv)
    got, refused = choose(CARDS[name], q, k, v, mask, enable_gqa=kv != 8)
    assert got == backend and list(refused) == ["flash", "efficient", "cudnn", "math"][
        :len(refused)]


def test_a_fall_to_math_is_reported_with_its_site_and_its_scores_counted() -> None:
    with emulated_cuda(card="rtx4090", storage="meta") as emu:
        q = torch.empty(1, 8, 1024, 64, dtype=torch.bfloat16, device="cuda")
        k = torch.empty(1, 2, 1024, 64, dtype=torch.bfloat16, device="cuda")
        base = torch.cuda.max_memory_allocated()
        F.scaled_dot_product_attention(q, k, k, enable_gqa=True)  # flash
        flash = torch.cuda.max_memory_allocated() - base
        F.scaled_dot_product_attention(q, k, k, attn_mask=torch.ones(  # math: the mask line
            1024, 1024, dtype=torch.bool, device="cuda"), enable_gqa=True)
        math = torch.cuda.max_memory_allocated() - base
    (what, where), = emu.fallbacks
    assert what.startswith("attention: falls back to math on rtx4090") and "grouped" in what
    assert where.startswith(f"{HERE}:") and "attention:flash" in {k for k, _ in emu.kernels}
    scores = 8 * 1024 * 1024 * 4  # one float32 [B, H, L, S]: math holds two, flash none
    assert math >= 2 * scores > scores > flash


def test_fallbacks_raise_where_they_happen_when_asked() -> None:
    with emulated_cuda(card="rtx3060", fallbacks="raise"), \
            pytest.raises(CudaEmulationError) as err:
        _scaled(_fp8(32, 64), _fp8(48, 64).t())
    assert err.value.kind == "kernel" and err.value.where.startswith(f"{HERE}:")


LAYOUT_PATHS = {  # weight layout -> the fast kernel its matrix products should take
    "comfy_fp8_e4m3fn": ("_scaled_mm", lambda c: c.fp8),
    "comfy_int8": ("_int_mm", lambda c: c.int8),
}


@pytest.fixture(scope="module")
def saved() -> dict[str, Path]:
    """The tiny checkpoint in each layout of LAYOUT_PATHS (saved on the emulated device)."""
    work = Path(tempfile.mkdtemp())
    folder = write_tiny_checkpoint(work / "ck")
    with emulated_cuda():
        return {fmt: Path(save.main([str(folder), str(work / fmt), "--weight-dtype", fmt,
                                     "--device", "cuda"])) for fmt in LAYOUT_PATHS}


@pytest.mark.parametrize("fmt", sorted(LAYOUT_PATHS))
@pytest.mark.parametrize("name", ["rtx3060", "rtx4090"])
def test_each_layout_s_fast_path_is_engaged_on_the_cards_that_have_it(saved, fmt: str,
                                                                      name: str) -> None:  # noqa: ANN001
    kernel, has = LAYOUT_PATHS[fmt]
    with emulated_cuda(card=name) as emu:
        pipe = load_dimoo(saved[fmt], device="cuda", dtype=torch.bfloat16)
        pipe.generate("a red circle", width=32, height=32, steps=4, seed=0, decode=False)
    taken = sum(n for (k, _), n in emu.kernels.items() if k == kernel)
    upcasts = [w for (what, w) in emu.fallbacks if what.startswith("fp8:")]
    assert (taken > 0) == has(CARDS[name]), dict(emu.kernels)
    # without the kernel, the fp8 weights reach a float matmul: reported at the layer's line
    assert bool(upcasts) == (kernel == "_scaled_mm" and not has(CARDS[name]))
    assert all(w.startswith("ladr_core/dimoo/weights/quant.py:") for w in upcasts)


@pytest.mark.parametrize("choice", ["auto", "bf16"])
def test_a_card_without_bf16_gets_fp32_with_a_message(choice: str, caplog) -> None:  # noqa: ANN001
    for name, c in CARDS.items():
        caplog.clear()
        with emulated_cuda(card=name), caplog.at_level(logging.WARNING):
            dtype = pick_dtype(choice, torch.device("cuda", 0))
        assert dtype == (torch.bfloat16 if c.bf16 else torch.float32), name
        assert ("no bf16 tensor cores" in caplog.text) == (not c.bf16)

