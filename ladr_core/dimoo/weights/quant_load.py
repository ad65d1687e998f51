"""Load a folder saved in ComfyUI's quantized format (quant.py) into an ``LLaDAModel``.

Every shard's header is checked first (each layer of `_quantization_metadata` a block linear in
a format this loader runs, stored in its dtype with a finite, positive `weight_scale` of an
accepted shape and for fp8 an optional scalar `input_scale`; nothing else present), so a bad
folder is refused whole, naming the file, before a tensor is read. `operations` None builds
`quant.QuantOps`; inside ComfyUI the host passes `comfy.ops.mixed_precision_ops(...)`, whose
`Linear` reads the same `comfy_quant` entries, so ComfyUI's fast fp8 / int8 matmuls apply.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ..model.config import LLaDAConfig
from ..model.transformer import LLaDAModel
from . import fp8, quant
from .files import CheckpointError, get_tensor, open_shard, shard_files
from .formats import parameter_shapes

__all__ = ["quantized_layers", "is_quantized_folder", "load_quantized_transformer", "check_format_support"]

CONVERT_HINT = ("convert the bf16 original again: python -m ladr_core.dimoo.save SRC DST "
                "--weight-dtype comfy_fp8_e4m3fn (or comfy_int8)")


def quantized_layers(folder: Path) -> dict[str, tuple[str, Path]]:
    """{layer: (format, shard)} from the shards' ``_quantization_metadata`` ({} when none)."""
    layers: dict[str, tuple[str, Path]] = {}
    for shard in shard_files(folder):
        with open_shard(shard) as handle:
            text = (handle.metadata() or {}).get(quant.METADATA_KEY)
        try:
            parsed = quant.parse_metadata(text, str(shard))
        except ValueError as exc:
            raise CheckpointError(f"{exc}; {CONVERT_HINT}") from None
        layers.update({layer: (fmt, shard) for layer, fmt in parsed.items()})
    return layers


def is_quantized_folder(folder: Path) -> bool:
    """True when ``folder``'s shards carry ``_quantization_metadata``, valid or not (loading
    the folder then reports what is wrong with it); False when the shards cannot be read."""
    try:
        for shard in shard_files(folder):
            with open_shard(shard) as handle:
                if quant.METADATA_KEY in (handle.metadata() or {}):
                    return True
    except CheckpointError:
        return False
    return False


def check_format_support(fmt: str, device: torch.device, dtype: torch.dtype, source: Any) -> None:
    """RuntimeError naming what is missing when ``device`` cannot store or cast ``fmt``."""
    alternative = ("or use a GGUF Q8_0 file (python -m ladr_core.dimoo.save SRC out.gguf "
                   "--weight-dtype Q8_0), which runs on any torch device")
    try:
        storage = quant.storage_dtype(fmt)
    except RuntimeError as exc:
        raise RuntimeError(f"{source}: {exc}") from None
    problem = fp8.round_trip_problem(storage, device, dtype)
    if isinstance(problem, Exception):
        raise RuntimeError(f"{source} holds {fmt} weights, which device {device} cannot store "
                           f"or cast with torch {torch.__version__} ({problem}); load it on a CUDA "
                           f"or CPU device, {alternative}")
    if problem is False:
        raise RuntimeError(f"{source} holds {fmt} weights, but torch.{quant.COMFY_FORMATS[fmt]} "
                           f"does not round-trip on {device}; {alternative}")


def _layer_problem(layer: str, fmt: str, shapes: dict[str, tuple[list[int], str]],
                   expected: dict[str, torch.Size]) -> str | None:
    """Why the stored tensors of quantized ``layer`` are unusable, or None."""
    if fmt not in quant.COMFY_FORMATS:
        return (f"layer {layer} uses quantization format {fmt!r}, which this loader does not "
                f"run (it runs {', '.join(quant.COMFY_FORMATS)})")
    if not fp8.is_block_linear_weight(layer + ".weight") or layer + ".weight" not in expected:
        return (f"layer {layer} is quantized, but only the block linears (q_proj ... ff_out) "
                "may be; the embedding, the norms and the output head stay in float")
    shape, dtype = shapes.get(layer + ".weight", (None, None))
    want = str(quant.storage_dtype(fmt)).removeprefix("torch.")
    if dtype is None or dtype.lower() != _st_name(want):
        return f"{layer}.weight is {dtype or 'missing'}, but format {fmt} stores {want}"
    out = int(expected[layer + ".weight"][0])
    scale = shapes.get(layer + ".weight_scale")
    allowed = ([], [1], [out, 1]) if fmt == "int8_tensorwise" else ([], [1])
    if scale is None or scale[0] not in allowed or scale[1] != "F32":
        return (f"{layer}.weight_scale is {scale or 'missing'}; format {fmt} needs float32 of "
                f"shape {' or '.join(str(tuple(a)) for a in allowed)}")
    inp = shapes.get(layer + ".input_scale")
    if inp is not None and (fmt == "int8_tensorwise" or inp[0] not in ([], [1]) or inp[1] != "F32"):
        return f"{layer}.input_scale is {inp}; only fp8 layers take a float32 scalar input_scale"
    return None


def _st_name(torch_name: str) -> str:
    """torch dtype name -> safetensors header dtype (lower case)."""
    return {"float8_e4m3fn": "f8_e4m3", "float8_e5m2": "f8_e5m2", "int8": "i8"}[torch_name]


def _headers(folder: Path) -> tuple[dict[str, Path], dict[str, tuple[list[int], str]]]:
    """key -> shard and key -> (shape, safetensors dtype) of every stored tensor."""
    origin: dict[str, Path] = {}
    shapes: dict[str, tuple[list[int], str]] = {}
    for shard in shard_files(folder):
        with open_shard(shard) as handle:
            for key in list(handle.keys()):
                sl = handle.get_slice(key)
                origin[key], shapes[key] = shard, (list(sl.get_shape()), sl.get_dtype())
    return origin, shapes


def _validate(folder: Path, layers: dict[str, tuple[str, Path]],
              expected: dict[str, torch.Size]) -> dict[str, Path]:
    """Check every header against the model; returns key -> shard of the tensors to read."""
    origin, shapes = _headers(folder)
    for layer, (fmt, shard) in sorted(layers.items()):
        problem = _layer_problem(layer, fmt, shapes, expected)
        if problem is not None:
            raise CheckpointError(f"{shard}: {problem}; {CONVERT_HINT}")
    extras = {f"{layer}.{n}" for layer in layers for n in ("weight_scale", "input_scale")}
    for key, (shape, _) in shapes.items():
        if key in expected and key.removesuffix(".weight") not in layers \
                and list(expected[key]) != shape:
            raise CheckpointError(f"{origin[key]}: {key} has shape {tuple(shape)} but config.json "
                                  f"implies {tuple(expected[key])}; config.json and the weights "
                                  "do not belong together")
        if key.removesuffix(".weight") in layers and list(expected[key]) != shape:
            raise CheckpointError(f"{origin[key]}: {key} has shape {tuple(shape)}, expected "
                                  f"{tuple(expected[key])}; {CONVERT_HINT}")
    unexpected = sorted(k for k in shapes if k not in expected and k not in extras)
    missing = sorted(set(expected) - set(shapes))
    if missing or unexpected:
        raise CheckpointError(f"{folder}: weights do not match config.json (missing "
                              f"{missing[:4]}, unexpected {unexpected[:4]}); {CONVERT_HINT}")
    return origin


def _read(origin: dict[str, Path], layers: dict[str, tuple[str, Path]], dtype: torch.dtype,
          device: torch.device) -> dict[str, torch.Tensor]:
    """Tensors as ComfyUI's loaders see them: quantized layers as stored plus ``comfy_quant``,
    everything else in ``dtype``; scales float32; all checked finite and positive."""
    state: dict[str, torch.Tensor] = {}
    by_shard: dict[Path, list[str]] = {}
    for key, shard in origin.items():
        by_shard.setdefault(shard, []).append(key)
    for shard, keys in by_shard.items():
        with open_shard(shard) as handle:
            for key in keys:
                tensor = get_tensor(handle, shard, key)
                layer = key.rsplit(".", 1)[0]
                if key.endswith(("weight_scale", "input_scale")):
                    tensor = tensor.float()
                    if not bool(torch.isfinite(tensor).all() and (tensor > 0).all()):
                        raise CheckpointError(f"{shard}: {key} holds non-finite or non-positive "
                                              f"scales; {CONVERT_HINT}")
                    state[key] = tensor.to(device)
                elif layer in layers and key.endswith(".weight"):
                    state[key] = tensor.to(device)
                else:
                    state[key] = tensor.to(device=device, dtype=dtype)
    for layer, (fmt, _) in layers.items():
        state[layer + ".comfy_quant"] = quant.quant_conf_tensor(fmt)
    return state


def load_quantized_transformer(folder: Path, config: LLaDAConfig, dtype: torch.dtype,
                               device: torch.device, operations: Any = None) -> LLaDAModel:
    """The transformer of a ComfyUI-format folder (module docstring); CheckpointError naming the
    shard when a header is wrong, RuntimeError when ``device`` cannot hold a format."""
    layers = quantized_layers(folder)
    for fmt in sorted({f for f, _ in layers.values()} & set(quant.COMFY_FORMATS)):
        check_format_support(fmt, device, dtype, folder)
    expected = parameter_shapes(config)
    origin = _validate(folder, layers, expected)
    state = _read(origin, layers, dtype, device)
    with torch.device("meta"):
        model = LLaDAModel(config, init_std=None,
                           operations=quant.QuantOps if operations is None else operations)
    model.load_state_dict(state, strict=True, assign=True)
    return model.eval().requires_grad_(False)
