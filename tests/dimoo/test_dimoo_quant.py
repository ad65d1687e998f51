"""ComfyUI's quantized format outside ComfyUI: quantize_layer, QuantLinear's arithmetic, the
streaming converter, calibration and loading (quant.py, quant_load.py, save.py, calibrate.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from safetensors import safe_open

from ladr_core import load_dimoo, nano_model_path, save_dimoo
from ladr_core.dimoo.input_ranges import measure_input_ranges, record_input_amax
from ladr_core.dimoo.weights import quant
from ladr_core.dimoo.weights.convert import Conversion, convert_folder

E4M3 = torch.float8_e4m3fn
IDS = torch.tensor([[3, 7, 14, 20, 2, 2, 33, 40, 41, 9, 5, 1]])


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


def _logits(pipe) -> torch.Tensor:
    with torch.no_grad():
        return pipe.transformer(IDS).float()


def _layer(fmt: str, w: torch.Tensor, input_amax: float | None = None,
           scale: str = "channel") -> quant.QuantLinear:
    parts = quant.quantize_layer(w, fmt, input_amax, scale)
    layer = quant.QuantLinear(w.shape[1], w.shape[0], bias=False)
    state = {**parts, "comfy_quant": quant.quant_conf_tensor(fmt)}
    layer.load_state_dict(state, strict=True)
    return layer


def test_quantize_layer_writes_the_scales_comfyuis_layouts_expect() -> None:
    g = torch.Generator().manual_seed(0)
    w = torch.randn(16, 64, generator=g) * torch.logspace(-2, 0, 16)[:, None]
    f = quant.quantize_layer(w, "float8_e4m3fn", input_amax=896.0)
    assert f["weight"].dtype == E4M3 and f["weight_scale"].shape == ()
    assert float(f["weight_scale"]) == pytest.approx(float(w.abs().max()) / 448)
    assert float(f["input_scale"]) == pytest.approx(2.0)
    assert _rel(f["weight"].float() * f["weight_scale"], w) < 0.05
    per_row = quant.quantize_layer(w, "int8_tensorwise")
    assert per_row["weight"].dtype == torch.int8 and per_row["weight_scale"].shape == (16, 1)
    assert (per_row["weight"].abs().amax(dim=1) == 127).all()  # every row uses its full range
    tensor = quant.quantize_layer(w, "int8_tensorwise", scale="tensor")
    assert tensor["weight_scale"].shape == ()
    err_row = _rel(per_row["weight"].float() * per_row["weight_scale"], w)
    err_tensor = _rel(tensor["weight"].float() * tensor["weight_scale"], w)
    assert err_row < 0.01 < err_tensor  # small rows lose their bits with one scale


def test_fp8_layer_w8a16_and_w8a8_arithmetic_with_input_clipping() -> None:
    g = torch.Generator().manual_seed(1)
    w = torch.randn(32, 64, generator=g) * 0.05
    x = torch.randn(3, 5, 64, generator=g)
    x[0, 0, 0] = 50.0  # beyond input_amax = 8: clipped by the fast path
    layer = _layer("float8_e4m3fn", w, input_amax=8.0)
    w8, s_w, s_in = layer.weight.float(), layer.weight_scale, layer.input_scale
    layer.quantize_input = False
    torch.testing.assert_close(layer(x), F.linear(x, w8 * s_w), rtol=1e-6, atol=1e-6)
    layer.quantize_input = True
    xq = (x / s_in).clamp(-448, 448).to(E4M3).float() * s_in
    want = F.linear(xq, w8 * s_w)
    torch.testing.assert_close(layer(x), want, rtol=1e-5, atol=1e-5)
    assert float(xq.abs().max()) == 8.0  # the outlier was clipped at 448 * input_scale
    assert layer.quantize_input is True and _rel(layer(x), F.linear(x, w)) > 0.01


def test_int8_layer_quantizes_each_input_row_on_the_fly() -> None:
    g = torch.Generator().manual_seed(2)
    w = torch.randn(24, 48, generator=g) * 0.05
    x = torch.randn(7, 48, generator=g) * torch.logspace(-3, 1, 7)[:, None]
    layer = _layer("int8_tensorwise", w)
    s_x = x.abs().amax(dim=1, keepdim=True) / 127
    xq = (x / s_x).round()
    want = (xq @ layer.weight.float().t()) * s_x * layer.weight_scale.t()
    torch.testing.assert_close(layer(x), want, rtol=1e-5, atol=1e-7)
    assert _rel(layer(x), F.linear(x, w)) < 0.02  # tiny rows keep their precision


def test_a_plain_layer_without_comfy_quant_is_an_ordinary_linear() -> None:
    layer = quant.QuantLinear(8, 4, bias=True)
    w, b = torch.randn(4, 8), torch.randn(4)
    layer.load_state_dict({"weight": w.bfloat16(), "bias": b}, strict=True)
    x = torch.randn(2, 8)
    assert layer.quant_format is None
    torch.testing.assert_close(layer(x), F.linear(x, w.bfloat16().float(), b))


@pytest.fixture(scope="module")
def comfy_fp8(tmp_path_factory) -> Path:
    """The shipped nano model (trained weights) in ComfyUI fp8 with calibrated input scales."""
    amax = measure_input_ranges(nano_model_path(), ["a red circle", "two green squares"])
    conv = Conversion("comfy_fp8_e4m3fn", torch.float32, input_amax={k: 2 * v for k, v in
                                                                     amax.items()})
    return convert_folder(nano_model_path(), tmp_path_factory.mktemp("q") / "fp8", conv)


def test_converted_folder_carries_comfyuis_metadata_and_loads_close_to_fp32(
        comfy_fp8: Path) -> None:
    shard = next(comfy_fp8.glob("model-*.safetensors"))
    with safe_open(str(shard), "pt") as f:
        meta = json.loads(f.metadata()[quant.METADATA_KEY])
        layer = "model.transformer.blocks.0.v_proj"
        assert meta["layers"][layer] == {"format": "float8_e4m3fn"}
        assert f.get_tensor(layer + ".weight").dtype == E4M3
        assert f.get_tensor(layer + ".input_scale").shape == ()
        assert f.get_tensor("model.transformer.wte.weight").dtype == torch.float32
    assert len(meta["layers"]) == 6 * 7
    assert json.loads((comfy_fp8 / "config.json").read_text())["ladr_weight_dtype"] == \
        "float8_e4m3fn"
    pipe = load_dimoo(comfy_fp8, dtype=torch.float32)
    ref = _logits(load_dimoo(nano_model_path(), dtype=torch.float32))
    assert isinstance(pipe.transformer.blocks[1].ff_out, quant.QuantLinear)
    assert _rel(_logits(pipe), ref) < 0.03  # W8A16 (a CPU has no fp8 matmul)
    for m in pipe.transformer.modules():
        if isinstance(m, quant.QuantLinear):
            m.quantize_input = True
    assert _rel(_logits(pipe), ref) < 0.03  # W8A8 with the calibrated input scales
    res = pipe.generate("a red circle", steps=4, seed=0)
    assert res.images.shape == (1, 48, 48, 3) and torch.isfinite(res.images).all()


@pytest.mark.parametrize("scale", ["channel", "tensor"])
def test_int8_folder_of_the_multi_shard_fixture(dimoo_checkpoint: Path, tmp_path: Path,
                                                scale: str) -> None:
    out = convert_folder(dimoo_checkpoint, tmp_path / "int8",
                         Conversion("comfy_int8", torch.float32, int8_scale=scale), shard_bytes=4096)
    assert len(list(out.glob("model-*.safetensors"))) > 1 and not list(out.glob("*.py"))
    pipe = load_dimoo(out, dtype=torch.float32)
    ff = pipe.transformer.blocks[0].ff_proj
    assert ff.weight.dtype == torch.int8 and ff.weight_scale.shape == (
        (48, 1) if scale == "channel" else ())
    ref = load_dimoo(dimoo_checkpoint, dtype=torch.float32)
    assert _rel(_logits(pipe), _logits(ref)) < 0.1  # std-0.3 random weights amplify errors


def test_save_dimoo_of_a_loaded_comfy_folder_round_trips(comfy_fp8: Path, tmp_path: Path) -> None:
    pipe = load_dimoo(comfy_fp8, dtype=torch.float32)
    again = load_dimoo(save_dimoo(pipe, tmp_path / "again", source=comfy_fp8), dtype=torch.float32)
    torch.testing.assert_close(_logits(again), _logits(pipe), rtol=0, atol=0)


def test_streaming_pack_fp8_conversion_equals_converting_while_loading(
        dimoo_checkpoint: Path, tmp_path: Path) -> None:
    out = convert_folder(dimoo_checkpoint, tmp_path / "fp8", Conversion("fp8_e4m3fn",
                                                                        torch.float32))
    saved = load_dimoo(out, dtype=torch.float32)
    direct = load_dimoo(dimoo_checkpoint, dtype=torch.float32, weight_dtype="fp8_e4m3fn")
    torch.testing.assert_close(_logits(saved), _logits(direct), rtol=0, atol=0)


def test_lazy_calibration_equals_recording_the_loaded_model() -> None:
    from ladr_core.dimoo.denoise.denoiser import DiMOODenoiser
    from ladr_core.dimoo.denoise.prompt import ImageLayout, build_prompt_batch
    from ladr_core.dimoo.input_ranges import range_items

    prompts = ["a red circle", "two green squares"]
    lazy = measure_input_ranges(nano_model_path(), prompts)
    pipe = load_dimoo(nano_model_path(), dtype=torch.float32)
    layout = ImageLayout(48 // pipe.vq_factor, 48 // pipe.vq_factor)
    items, tokens, masked = range_items(pipe.ids, layout.n_codes, prompts, 0)
    batch = build_prompt_batch(pipe.encode, pipe.ids, items, None, layout, True)
    denoise = DiMOODenoiser(pipe.transformer, batch, pipe.ids, pipe.default_cfg)
    with torch.no_grad(), record_input_amax(pipe.transformer) as full:
        denoise(tokens, masked)
    assert len(lazy) == 6 * 7 and lazy == pytest.approx(full, rel=1e-6)
    assert all(v > 0 for v in lazy.values())


@pytest.mark.parametrize("fmt", ["fp8_e4m3fn", "comfy_fp8_e4m3fn", "comfy_int8"])
def test_row_chunked_conversion_equals_converting_whole_matrices(fmt: str, monkeypatch) -> None:
    from ladr_core.dimoo.weights import staging

    g = torch.Generator().manual_seed(3)
    w = (torch.randn(50, 64, generator=g) * torch.logspace(-2, 0, 50)[:, None]).bfloat16()
    conv = Conversion(fmt, input_amax={"model.transformer.blocks.0.q_proj": 3.0})
    key = "model.transformer.blocks.0.q_proj.weight"
    whole = conv.convert(key, w, True)
    monkeypatch.setattr(staging, "CHUNK", 7 * 64)  # 8 chunks of 7 rows, the last one short
    assert len(staging.row_chunks(w.shape)) == 8
    chunked = conv.convert(key, w, True)
    assert whole.keys() == chunked.keys()
    for name in whole:
        assert torch.equal(whole[name].view(torch.uint8) if whole[name].element_size() == 1
                           else whole[name], chunked[name].view(torch.uint8)
                           if chunked[name].element_size() == 1 else chunked[name]), name


def test_e5m2_folder_loads_in_its_own_dtype(tmp_path: Path) -> None:
    out = convert_folder(nano_model_path(), tmp_path / "e5m2",
                         Conversion("comfy_fp8_e5m2", torch.float32))
    pipe = load_dimoo(out, dtype=torch.float32)
    q = pipe.transformer.blocks[3].up_proj
    assert q.quant_format == "float8_e5m2" and q.weight.dtype == torch.float8_e5m2
    ref = _logits(load_dimoo(nano_model_path(), dtype=torch.float32))
    assert _rel(_logits(pipe), ref) < 0.06  # 2 mantissa bits: coarser than e4m3fn


E5M2 = torch.float8_e5m2


def _e4m3_w8a8(layer: quant.QuantLinear, x: torch.Tensor, s_x: torch.Tensor) -> torch.Tensor:
    """The W8A8 product with e4m3fn activations at scale s_x, from the same fp8 values."""
    xq = (x / s_x).clamp(-448, 448).to(E4M3).float()
    return (xq @ layer.weight.float().t()) * (s_x * layer.weight_scale)


@pytest.mark.parametrize("calibrated", [True, False])
def test_e5m2_layers_quantize_their_inputs_to_e4m3fn(calibrated: bool) -> None:
    """_scaled_mm refuses e5m2 x e5m2: an e5m2 layer's activations are e4m3fn, at the stored
    input scale moved to e4m3's range (x 57344 / 448) or, uncalibrated, at max|x| / 448."""
    g = torch.Generator().manual_seed(4)
    w, x = torch.randn(32, 64, generator=g) * 0.05, torch.randn(6, 64, generator=g) * 30
    layer = _layer("float8_e5m2", w, input_amax=120.0 if calibrated else None)
    layer.quantize_input = True
    assert layer.weight.dtype == E5M2
    s_x = (layer.input_scale * 128 if calibrated else x.abs().max() / 448)
    if calibrated:
        assert float(s_x) == pytest.approx(120.0 / 448, rel=1e-6)  # what an e4m3 layer stores
    torch.testing.assert_close(layer(x), _e4m3_w8a8(layer, x, s_x), rtol=1e-5, atol=1e-5)
    s5 = layer.input_scale if calibrated else torch.ones(())
    e5m2_inputs = ((x / s5).to(E5M2).float() @ layer.weight.float().t()) * s5 * layer.weight_scale
    assert not torch.allclose(layer(x), e5m2_inputs, rtol=1e-3, atol=1e-3)  # not e5m2 inputs


@pytest.mark.parametrize("fmt", ["float8_e4m3fn", "float8_e5m2"])
def test_the_scaled_mm_path_takes_e4m3_inputs_for_both_weight_formats(fmt: str,
                                                                      monkeypatch) -> None:
    """The fast path (chosen where fp8_matmul_available) runs torch._scaled_mm, here on the
    CPU, on the same e4m3 activations as the exact fallback: equal up to float32 sums."""
    g = torch.Generator().manual_seed(5)
    w, x = torch.randn(32, 64, generator=g) * 0.05, torch.randn(2, 8, 64, generator=g)
    layer = _layer(fmt, w, input_amax=4.0)
    slow = layer(x)  # CPU: W8A16 by default
    monkeypatch.setattr(quant, "fp8_matmul_available", lambda device: True)
    fast = layer(x)
    s_x = quant.fp8_input_scale(layer.weight.dtype, layer.input_scale, x)
    want = _e4m3_w8a8(layer, x.reshape(-1, 64), s_x).reshape(2, 8, 32)
    torch.testing.assert_close(fast, want, rtol=1e-5, atol=1e-5)
    assert not torch.equal(fast, slow)  # W8A8 now, not the W8A16 fallback


def test_w8a16_multiplies_by_the_float32_scale_as_comfyui_does() -> None:
    """ComfyUI's ``weight.to(dtype) * scale``: on the CPU the scale is not rounded to bf16."""
    g = torch.Generator().manual_seed(6)
    w, x = torch.randn(16, 32, generator=g) * 0.01, torch.randn(4, 32, generator=g)
    layer = _layer("float8_e4m3fn", w)
    y = layer(x.bfloat16())
    want = F.linear(x.bfloat16(), (layer.weight.float() * layer.weight_scale).bfloat16())
    torch.testing.assert_close(y, want, rtol=0, atol=0)


def test_int8_matmul_is_exact_for_few_rows_and_on_the_float32_fallback() -> None:
    g = torch.Generator().manual_seed(7)
    # biased codes: sums reach ~5e7 > 2**24, where a single float32 matmul rounds
    xq = torch.randint(100, 128, (20, 4096), generator=g, dtype=torch.int8)
    wq = torch.randint(100, 128, (24, 4096), generator=g, dtype=torch.int8)
    want = xq.long() @ wq.long().t()
    assert not torch.equal((xq.float() @ wq.float().t()).long(), want)  # the test can fail
    for m in (1, 16, 17, 20):  # fewer than 17 rows are padded for CUDA's _int_mm
        got = quant._int8_matmul(xq[:m], wq)
        assert got.dtype == torch.int32 and torch.equal(got.long(), want[:m])
    assert torch.equal(quant._int8_matmul_float32(xq, wq).long(), want)
    assert torch.equal(quant._int8_matmul_float32(xq[:, :1000], wq[:, :1000]).long(),
                       xq[:, :1000].long() @ wq[:, :1000].long().t())  # K below one chunk


@pytest.mark.parametrize("fmt", ["float8_e4m3fn", "float8_e5m2", "int8_tensorwise"])
def test_quantize_layer_builds_every_tensor_on_the_weight_device(fmt: str) -> None:
    w = torch.empty(16, 64, device="meta")  # a factory without device= would meet meta and raise
    out = quant.quantize_layer(w, fmt, input_amax=3.0 if fmt != "int8_tensorwise" else None,
                               weight_amax=1.0)
    assert {t.device.type for t in out.values()} == {"meta"}
