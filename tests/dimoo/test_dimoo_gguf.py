"""GGUF files (gguf_write.py, gguf.py): recipes, a layer-by-layer writer the gguf package reads,
and a loader whose layers dequantize at use with logits close to float."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from gguf import GGUFReader

from ladr_core import load_dimoo, nano_model_path
from ladr_core.dimoo.weights import ggml
from ladr_core.dimoo.weights.gguf import ARCH, KEYS
from ladr_core.dimoo.weights.gguf_write import more_bits, tensor_type, write_gguf

IDS = torch.tensor([[3, 7, 14, 20, 2, 2, 33, 40, 41, 9, 5, 1]])
RECIPES = ("Q8_0", "Q5_K_M", "Q4_K_M")


def _logits(pipe) -> torch.Tensor:
    with torch.no_grad():
        return pipe.transformer(IDS).float()


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("gguf")
    return {r: write_gguf(nano_model_path(), root / f"nano-{r}.gguf", r) for r in RECIPES}


@pytest.fixture(scope="module")
def reference() -> torch.Tensor:
    return _logits(load_dimoo(nano_model_path(), dtype=torch.float32))


def test_q4_k_m_recipe_on_the_8b_shapes() -> None:
    """LLaDA-8B: d 4096, MLP 12288, 32 layers, vocab 134656: every row fits the K blocks."""
    def kind(name: str, shape: list[int]) -> tuple[str, bool]:
        return tensor_type("Q4_K_M", name, shape, 32)

    assert kind("blocks.0.q_proj.weight", [4096, 4096]) == ("Q4_K", False)
    assert kind("blocks.0.v_proj.weight", [4096, 4096]) == ("Q6_K", False)  # first eighth
    assert kind("blocks.5.ff_out.weight", [4096, 12288]) == ("Q4_K", False)
    assert kind("blocks.6.ff_out.weight", [4096, 12288]) == ("Q6_K", False)  # (6 - 4) % 3 == 2
    assert kind("blocks.31.v_proj.weight", [4096, 4096]) == ("Q6_K", False)  # last eighth
    assert kind("wte.weight", [134656, 4096]) == ("Q4_K", False)
    assert kind("ff_out.weight", [134656, 4096]) == ("Q6_K", False)
    assert kind("ln_f.weight", [4096]) == ("F32", False)
    assert sum(more_bits(i, 32) for i in range(32)) == 16
    assert tensor_type("Q8_0", "ff_out.weight", [134656, 4096], 32) == ("Q8_0", False)


def test_files_hold_the_recipes_and_the_gguf_package_reads_them(files: dict[str, Path]) -> None:
    reader = GGUFReader(str(files["Q4_K_M"]))
    arch = reader.fields["general.architecture"]
    assert bytes(arch.parts[arch.data[0]]).decode() == ARCH
    assert KEYS["config"] in reader.fields and KEYS["tokenizer"] in reader.fields
    kinds = {t.name: t.tensor_type.name for t in reader.tensors}
    assert kinds["blocks.0.q_proj.weight"] == "Q4_K"
    assert kinds["blocks.2.v_proj.weight"] == "Q6_K" and kinds["blocks.5.ff_out.weight"] == "Q6_K"
    assert kinds["wte.weight"] == kinds["ff_out.weight"] == "Q8_0"  # 128-wide rows fall back
    assert kinds["ln_f.weight"] == "F32" and kinds["vq.quantize.embedding.weight"] == "F32"
    shape = [int(d) for d in reversed(next(t for t in reader.tensors
                                           if t.name == "blocks.0.ff_proj.weight").shape)]
    assert shape == [384 * 128 // 256, 256]  # nano rows are 128 wide: super-blocks laid flat
    sizes = {r: f.stat().st_size for r, f in files.items()}
    assert sizes["Q4_K_M"] < sizes["Q5_K_M"] < sizes["Q8_0"]


def test_logits_follow_the_bits_and_argmax_agrees(files: dict[str, Path],
                                                  reference: torch.Tensor) -> None:
    err, agree = {}, {}
    for recipe, path in files.items():
        got = _logits(load_dimoo(path, dtype=torch.float32))
        err[recipe] = float((got - reference).norm() / reference.norm())
        agree[recipe] = float((got.argmax(-1) == reference.argmax(-1)).float().mean())
    assert err["Q8_0"] < 0.01 < err["Q5_K_M"] < err["Q4_K_M"] < 0.06
    assert min(agree.values()) >= 0.9


def test_layers_keep_ggml_bytes_and_generation_runs(files: dict[str, Path]) -> None:
    pipe = load_dimoo(files["Q4_K_M"], dtype=torch.float32)
    q = pipe.transformer.blocks[0].q_proj
    assert q.weight.dtype == torch.uint8 and q.ggml_type == "Q4_K"
    assert q.weight.numel() == 128 * 128 * 144 // 256  # 4.5 bits per weight
    head = pipe.transformer.model.transformer.ff_out
    rows = head.weight_rows(slice(45, 301), torch.device("cpu"), torch.float32)
    full = ggml.dequantize(head.weight, "Q8_0", 128)
    torch.testing.assert_close(rows, full[45:301], rtol=0, atol=0)
    res = pipe.generate("a red circle", steps=8, seed=0)
    assert res.images.shape == (1, 48, 48, 3) and float(res.images.std()) > 0.01


def test_streamed_blocks_give_the_resident_logits(files: dict[str, Path]) -> None:
    resident = load_dimoo(files["Q5_K_M"], dtype=torch.float32)
    streamed = load_dimoo(files["Q5_K_M"], dtype=torch.float32, offload_blocks=True)
    torch.testing.assert_close(_logits(streamed), _logits(resident), rtol=0, atol=0)


def test_bf16_compute_dequantizes_into_bf16(files: dict[str, Path],
                                             reference: torch.Tensor) -> None:
    pipe = load_dimoo(files["Q8_0"], dtype=torch.bfloat16)
    with torch.no_grad():
        out = pipe.transformer(IDS)
    assert out.dtype == torch.bfloat16
    assert float((out.float() - reference).norm() / reference.norm()) < 0.05


def test_the_head_is_projected_in_chunks_with_the_same_logits(
        files: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """A quantized head goes through HEAD_CHUNK vocabulary rows at a time (the 8B head would
    be about 3 GiB of temporaries at once): every logit is the one matmul with the whole
    dequantized head gives, a vocabulary slice (the image tasks' codebook) too, up to the
    rounding of a float32 dot product in another summation order (a multi-threaded BLAS blocks
    a chunk's matmul differently from the whole one): |error| <= d * eps * (|x| @ |W|^T)."""
    from ladr_core.dimoo.model import transformer

    pipe = load_dimoo(files["Q4_K_M"], dtype=torch.float32)
    model = pipe.transformer
    hidden = torch.randn(5, model.config.d_model, generator=torch.Generator().manual_seed(0))
    whole = model.project(hidden)
    vocab = model.config.n_embeddings
    chunk = 48
    assert vocab > 2 * chunk and vocab % chunk, "pick a chunk that splits the nano vocabulary"
    calls: list[slice] = []
    head = model.model.transformer.ff_out
    select = head.weight_rows
    monkeypatch.setattr(head, "weight_rows", lambda r, d, t: calls.append(r) or select(r, d, t),
                        raising=False)
    monkeypatch.setattr(transformer, "HEAD_CHUNK", chunk)
    bound = _dot_rounding(model, hidden, select(slice(0, vocab), hidden.device, torch.float32))
    assert ((model.project(hidden) - whole).abs() <= bound).all()
    assert len(calls) == -(-vocab // chunk) and all(c.stop - c.start <= chunk for c in calls)
    part = slice(7, 7 + 3 * chunk + 5)
    assert ((model.project(hidden, part) - whole[:, part]).abs() <= bound[:, part]).all()


def _dot_rounding(model: torch.nn.Module, hidden: torch.Tensor, weight: torch.Tensor
                  ) -> torch.Tensor:
    """The float32 rounding bound of each logit's dot product over d_model terms, in any
    summation order (Higham's gamma_d, taken as d * eps), scaled as project() scales logits."""
    d = model.config.d_model
    x = model.model.transformer.ln_f(hidden)
    bound = d * torch.finfo(torch.float32).eps * (x.abs() @ weight.abs().T)
    return bound / math.sqrt(d) if model.config.scale_logits else bound


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_layer_dequantizes_in_row_chunks_into_the_compute_dtype(
        files: dict[str, Path], dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch) -> None:
    """A whole matrix for a 16-bit computation: DEQUANT_ROWS rows through float32 at a time,
    the same values as one decode."""
    from ladr_core.dimoo.weights import gguf

    pipe = load_dimoo(files["Q4_K_M"], dtype=dtype)
    head = pipe.transformer.model.transformer.ff_out
    n, rows = head.in_features, head.out_features
    whole = ggml.dequantize(head.weight, head.ggml_type, n, dtype)
    monkeypatch.setattr(gguf, "DEQUANT_ROWS", 40)
    assert rows > 40 and rows % 40
    got = head.dequantized(None, torch.device("cpu"), dtype, n)
    assert got.dtype == dtype and torch.equal(got, whole)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_the_compute_dtype_is_the_loads(files: dict[str, Path], dtype: torch.dtype) -> None:
    """A GGUF embedding stores raw uint8 bytes: the estimates take the load's dtype (a float32
    computation, pre-Ampere, counts 4 bytes a value), and without it the layers' own."""
    from ladr_core.dimoo.model.memory import model_compute_dtype

    pipe = load_dimoo(files["Q8_0"], dtype=dtype)
    assert next(pipe.transformer.parameters()).dtype == torch.uint8
    assert pipe._compute_dtype() == dtype == model_compute_dtype(pipe.transformer)
    wider = load_dimoo(files["Q8_0"], dtype=torch.float32)
    assert pipe.image_bytes() <= wider.image_bytes()
    assert (pipe.image_bytes() < wider.image_bytes()) == (dtype != torch.float32)
