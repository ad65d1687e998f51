"""fp8 block linears: quantization, loading (converted or saved), save_dimoo, and bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from ladr_core import load_dimoo, save_dimoo
from ladr_core.dimoo import CheckpointError
from ladr_core.dimoo.weights import fp8

E4M3 = torch.float8_e4m3fn
IDS = torch.tensor([[3, 7, 14, 20, 2, 2, 33, 40, 41, 9, 5, 1]])


def _logits(pipe) -> torch.Tensor:
    with torch.no_grad():
        return pipe.transformer(IDS).float()


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


@pytest.fixture(scope="module")
def fp32(dimoo_checkpoint: Path):
    return load_dimoo(dimoo_checkpoint, dtype=torch.float32)


@pytest.fixture(scope="module")
def saved(dimoo_checkpoint: Path, tmp_path_factory) -> Path:
    pipe = load_dimoo(dimoo_checkpoint, dtype=torch.float32, weight_dtype="fp8_e4m3fn")
    return save_dimoo(pipe, tmp_path_factory.mktemp("fp8") / "DiMOO-fp8")


def test_quantize_per_channel_beats_per_tensor_and_round_trips() -> None:
    g = torch.Generator().manual_seed(0)
    w = torch.randn(64, 48, generator=g) * torch.logspace(-6, 0, 64)[:, None]  # 6 decades
    w[5] = 0.0
    errs = {}
    for kind in fp8.SCALE_KINDS:
        q, s = fp8.quantize(w, E4M3, kind)
        assert q.dtype == E4M3 and s.dtype == torch.float32 and s.shape == (64,)
        assert float(q.float().abs().max()) <= 448.0
        d = fp8.dequantize(q, s)
        errs[kind] = max(_rel(d[i], w[i]) for i in range(64) if i != 5)  # worst row
    assert errs["channel"] < 0.05 < 0.2 < errs["tensor"]  # small rows lose their bits per tensor
    q, s = fp8.quantize(w, E4M3, "channel")
    assert s[5] == 1.0 and not q[5].float().any()  # a zero row: scale 1, no NaN
    with pytest.raises(ValueError, match="channel"):
        fp8.quantize(w, E4M3, "row")


def test_fp8_load_stores_block_linears_in_fp8_and_the_rest_in_dtype(dimoo_checkpoint: Path,
                                                                  fp32) -> None:
    pipe = load_dimoo(dimoo_checkpoint, dtype=torch.float32, weight_dtype="fp8_e4m3fn")
    sd = pipe.transformer.state_dict()
    fp8_keys = sorted(k for k, v in sd.items() if v.dtype == E4M3)
    assert fp8_keys == sorted(k for k in fp32.transformer.state_dict() if fp8.is_block_linear_weight(k))
    assert all(sd[k + "_scale"].dtype == torch.float32 for k in fp8_keys)
    assert sd["model.transformer.wte.weight"].dtype == torch.float32
    assert sd["model.transformer.ff_out.weight"].dtype == torch.float32
    assert sd["model.transformer.blocks.0.attn_norm.weight"].dtype == torch.float32
    out = _logits(pipe)
    # the fixture's random weights (std 0.3) amplify errors; nano figures: docs/reports/FP8.md
    err = _rel(out, _logits(fp32))
    assert out.dtype == torch.float32 and 0 < err < 0.2
    e5m2 = load_dimoo(dimoo_checkpoint, dtype=torch.float32, weight_dtype="fp8_e5m2")
    assert e5m2.transformer.blocks[0].up_proj.weight.dtype == torch.float8_e5m2
    assert err < _rel(_logits(e5m2), _logits(fp32)) < 0.4  # 2 mantissa bits instead of 3


def test_fp8_computes_in_bf16(dimoo_checkpoint: Path, fp32) -> None:
    pipe = load_dimoo(dimoo_checkpoint, dtype="bf16", weight_dtype="fp8_e4m3fn")
    out = _logits(pipe)
    assert pipe.transformer.model.transformer.wte.weight.dtype == torch.bfloat16
    assert _rel(out, _logits(fp32)) < 0.2


def test_generation_with_fp8_runs_end_to_end(dimoo_checkpoint: Path) -> None:
    pipe = load_dimoo(dimoo_checkpoint, dtype=torch.float32, weight_dtype="fp8_e4m3fn")
    res = pipe.generate("a red circle", width=16, height=16, steps=4, seed=1)
    assert res.tokens.shape == (1, 16) and res.images.shape == (1, 16, 16, 3)


def test_saved_folder_loads_as_stored_with_identical_logits(saved: Path,
                                                          dimoo_checkpoint: Path) -> None:
    converted = load_dimoo(dimoo_checkpoint, dtype=torch.float32, weight_dtype="fp8_e4m3fn")
    again = load_dimoo(saved, dtype=torch.float32)  # "default": as stored
    assert again.transformer.blocks[1].k_proj.weight.dtype == E4M3
    torch.testing.assert_close(_logits(again), _logits(converted), rtol=0, atol=0)
    config = json.loads((saved / "config.json").read_text())
    assert config["ladr_weight_dtype"] == "fp8_e4m3fn"
    assert (saved / "vqvae" / "config.json").is_file() and (saved / "tokenizer.json").is_file()
    assert not list(saved.glob("*.py"))  # the source's .py files are not copied
    index = json.loads((saved / "model.safetensors.index.json").read_text())["weight_map"]
    assert "model.transformer.blocks.0.q_proj.weight_scale" in index
    explicit = load_dimoo(saved, dtype=torch.float32, weight_dtype="fp8_e4m3fn")
    torch.testing.assert_close(_logits(explicit), _logits(converted), rtol=0, atol=0)


def test_save_refuses_a_non_empty_folder(saved: Path, dimoo_checkpoint: Path) -> None:
    pipe = load_dimoo(saved, dtype=torch.float32)
    with pytest.raises(ValueError, match="not an empty folder"):
        save_dimoo(pipe, saved)


def test_unknown_weight_dtype_lists_the_choices(dimoo_checkpoint: Path) -> None:
    with pytest.raises(ValueError, match=r"'int4'.*fp8_e4m3fn.*fp8_e5m2"):
        load_dimoo(dimoo_checkpoint, weight_dtype="int4")
    with pytest.raises(ValueError, match="fp8_scale"):
        load_dimoo(dimoo_checkpoint, weight_dtype="fp8_e4m3fn", fp8_scale="row")


def test_fp8_on_a_device_that_cannot_hold_it_names_what_is_missing(monkeypatch) -> None:
    with pytest.raises(RuntimeError, match=r"device meta cannot store or cast torch.float8_e4m3fn"):
        fp8.check_fp8_support("fp8_e4m3fn", torch.device("meta"), torch.bfloat16)
    monkeypatch.setitem(fp8.FP8_FORMATS, "fp8_e4m3fn", "float8_not_in_this_torch")
    with pytest.raises(RuntimeError, match=r"torch.float8_not_in_this_torch.*torch >= 2.1"):
        fp8.check_fp8_support("fp8_e4m3fn", torch.device("cpu"), torch.bfloat16)


def test_saved_e4m3_folder_refuses_another_fp8_format(saved: Path) -> None:
    with pytest.raises(ValueError, match=r"holds fp8_e4m3fn.*weight_dtype='fp8_e4m3fn'"):
        load_dimoo(saved, dtype=torch.float32, weight_dtype="fp8_e5m2")


def _rewrite(folder: Path, edit) -> Path:
    """Apply ``edit(state)`` to the shard holding blocks.0.q_proj; return that shard."""
    index = json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"]
    shard = folder / index["model.transformer.blocks.0.q_proj.weight"]
    with safe_open(str(shard), "pt") as h:
        state = {k: h.get_tensor(k) for k in h.keys()}  # noqa: SIM118 - not a dict
    edit(state)
    save_file(state, str(shard))
    return shard


Q = "model.transformer.blocks.0.q_proj.weight"


@pytest.mark.parametrize("case,match", [
    ("missing", r"q_proj.weight_scale is missing"),
    ("shape", r"q_proj.weight_scale has shape \(3,\)"),
    ("negative", r"non-finite or non-positive"),
    ("orphan", r"a scale without its fp8 weight"),
])
def test_missing_or_mismatched_scales_name_the_file(saved: Path, tmp_path: Path, case: str,
                                                    match: str) -> None:
    folder = shutil.copytree(saved, tmp_path / "copy")
    edits = {
        "missing": lambda s: s.pop(Q + "_scale", None),
        "shape": lambda s: s.__setitem__(Q + "_scale", torch.ones(3)),
        "negative": lambda s: s.__setitem__(Q + "_scale", -s[Q + "_scale"]),
        "orphan": lambda s: s.__setitem__(Q, s[Q].float() * s[Q + "_scale"][:, None]),
    }
    index = json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"]
    if case == "missing" and index[Q + "_scale"] != index[Q]:
        pytest.skip("scale saved in another shard")
    shard = _rewrite(folder, edits[case])
    if case == "missing":  # keep the index honest so the missing scale itself is the error
        data = json.loads((folder / "model.safetensors.index.json").read_text())
        data["weight_map"].pop(Q + "_scale")
        (folder / "model.safetensors.index.json").write_text(json.dumps(data))
    with pytest.raises(CheckpointError, match=match) as err:
        load_dimoo(folder, dtype=torch.float32)
    assert str(shard) in str(err.value)


def test_biased_linears_stay_in_the_compute_dtype() -> None:
    from ladr_core.dimoo.model.config import LLaDAConfig
    from ladr_core.dimoo.model.transformer import LLaDAModel

    cfg = LLaDAConfig(d_model=16, n_heads=2, n_layers=1, mlp_hidden_size=24, vocab_size=40,
                      max_sequence_length=32, include_bias=True)
    with torch.device("meta"):
        model = LLaDAModel(cfg, init_std=None)
        swapped = fp8.use_fp8_linears(model)
    assert swapped == []  # every block linear has a bias here
    with pytest.raises(ValueError, match="bias-less"):
        fp8.scaled_linear_class(torch.nn.Linear)(4, 4, bias=True)


def _scaled_layer(out: int = 64, inp: int = 48, seed: int = 0) -> torch.nn.Module:
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(out, inp, generator=g) * torch.logspace(-3, 0, out)[:, None]
    q, s = fp8.quantize(w, E4M3)
    layer = fp8.scaled_linear_class(torch.nn.Linear)(inp, out)
    layer.load_state_dict({"weight": q, "weight_scale": s})
    return layer


def test_the_output_scale_is_applied_in_float32_and_rounded_once() -> None:
    """y * s with y = x @ W8.T in bf16: rounding the float32 product once to bf16 errs by at most
    u = 2**-8 (bf16's unit roundoff) plus the float32 product's 2**-24, relative to the exact
    y * s; rounding s to bf16 first (the old code) errs by up to 2u + u**2 and breaks it."""
    layer = _scaled_layer()
    x = torch.randn(32, 48, generator=torch.Generator().manual_seed(1)).bfloat16()
    with torch.no_grad():
        got = layer(x)
        y = torch.nn.functional.linear(x, layer.weight.to(torch.bfloat16))
    exact = y.double() * layer.weight_scale.double()
    bound = (2.0 ** -8 + 2.0 ** -24) * exact.abs()
    assert got.dtype == torch.bfloat16 and bool(((got.double() - exact).abs() <= bound).all())
    old = y * layer.weight_scale.to(torch.bfloat16)
    assert not bool(((old.double() - exact).abs() <= bound).all())  # the bound catches it


def test_a_layer_left_on_another_device_copies_its_scale_once_per_change() -> None:
    """A host's offloaded layer (weights on the CPU, input elsewhere; 'meta' stands for the GPU):
    the scale's copy on the input's device is made once and kept until the buffer changes."""
    layer = _scaled_layer()
    x = torch.empty(4, 48, device="meta")
    assert layer(x).device.type == "meta"
    first = layer.__dict__["_scale_copy"][2]
    assert first.device.type == "meta" and first.dtype == torch.float32
    layer(x)
    assert layer.__dict__["_scale_copy"][2] is first  # no copy per call
    with torch.no_grad():
        layer.weight_scale.mul_(2)  # written in place (load_state_dict copies into it)
    layer(x)
    assert layer.__dict__["_scale_copy"][2] is not first
    second = layer.__dict__["_scale_copy"][2]
    layer.weight_scale = layer.weight_scale.clone()  # replaced, as module.to(device) does
    layer(x)
    assert layer.__dict__["_scale_copy"][2] is not second
    assert layer.__dict__["_scale_copy"][0] is layer.weight_scale


@pytest.mark.parametrize("kind", fp8.SCALE_KINDS)
def test_quantize_builds_every_tensor_on_the_weight_device(kind: str) -> None:
    q, s = fp8.quantize(torch.empty(8, 16, device="meta"), E4M3, kind)  # a CPU factory raises
    assert q.device.type == s.device.type == "meta" and q.dtype == E4M3
