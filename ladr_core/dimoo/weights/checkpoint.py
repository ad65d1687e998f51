"""Load an official Lumina-DiMOO folder without running any code from it (its layout:
docs/USAGE.md; what is read and never executed: docs/SECURITY.md).

The transformer is built on the ``meta`` device and filled with ``load_state_dict(assign=True)``
from safetensors tensors converted one at a time to the target dtype/device, so peak memory is
about the size of the weights. Pickle weights (.bin/.pt/.pth) are refused, ``trust_remote_code``
is never used and no ``.py`` in the folder is imported (config ``auto_map`` is ignored).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..model.config import DiMOOIds, LLaDAConfig
from ..model.transformer import LLaDAModel
from . import formats, fp8
from .files import (
    HUB_HINT,
    INDEX_FILE,
    CheckpointError,
    LoadedCheckpoint,
    check_vq_config,
    get_tensor,
    open_shard,
    read_config,
    read_json,
    resolve_device,
    resolve_dtype,
    shard_files,
)
from .staging import check_complete
from .tokenizer import load_tokenizer
from .vqfiles import read_vq_state, vq_folder, vq_weight_files

__all__ = ["check_folder", "load_checkpoint", "load_parts", "load_transformer", "load_vqvae",
           "read_safetensors", "read_vq_config"]


@dataclass
class _Target:
    """What the loaded tensors become: compute ``dtype`` on ``device``; block linears in
    ``fp8`` (a format name, converting bf16/fp32 sources with ``scale``) or as stored."""

    dtype: torch.dtype
    device: torch.device
    fp8: str | None = None
    scale: str = "channel"

    def fp8_dtype(self, name: str) -> torch.dtype:
        return fp8.check_fp8_support(name, self.device, self.dtype)


def _fp8_format(tensor: torch.Tensor) -> str | None:
    return next((n for n, a in fp8.FP8_FORMATS.items() if getattr(torch, a, None) == tensor.dtype),
                None)


def _stored_fp8(shard: Path, key: str, tensor: torch.Tensor, target: _Target) -> torch.Tensor:
    """A tensor saved in fp8 (a converted folder): checked against the request, kept as is."""
    name = _fp8_format(tensor)
    if not fp8.is_block_linear_weight(key):
        raise CheckpointError(f"{shard}: {key} is stored in {tensor.dtype}, but only block linear "
                              "weights may be fp8; re-save the folder with ladr_core.save_dimoo")
    if target.fp8 is not None and target.fp8 != name:
        raise ValueError(f"weight_dtype {target.fp8!r}: {shard} holds {name} weights; load it "
                         f"with weight_dtype={name!r} or 'default', or convert the bf16 original")
    return tensor.to(device=target.device, dtype=target.fp8_dtype(name))


def _read_shard(shard: Path, expected: dict[str, torch.Size], names: list[str] | None,
                target: _Target, out: dict[str, torch.Tensor], origin: dict[str, Path]) -> list[str]:
    """Read one shard into ``out`` (converted per tensor); return the unexpected names. A
    tensor converted to fp8 is read through its own short-lived handle, so its bf16 pages are
    released after each layer (peak: the result + one tensor)."""
    handle = open_shard(shard)
    unexpected: list[str] = []
    with handle:
        keys = list(handle.keys())
        if names is not None and set(names) - set(keys):
            missing = sorted(set(names) - set(keys))[:3]
            raise CheckpointError(f"{shard} lacks {missing} promised by {INDEX_FILE}; re-download it")
        for key in keys:
            scale_of = key.removesuffix("_scale") if key.endswith("." + fp8.SCALE_SUFFIX) else None
            if key not in expected and scale_of not in expected:
                unexpected.append(key)
                continue
            origin[key] = shard
            if scale_of is not None:
                out[key] = get_tensor(handle, shard, key).to(device=target.device, dtype=torch.float32)
                continue
            if handle.get_slice(key).get_shape() != list(expected[key]):
                raise CheckpointError(
                    f"{shard}: {key} has shape {tuple(handle.get_slice(key).get_shape())} but "
                    f"config.json implies {tuple(expected[key])}; config.json and the weights do "
                    "not belong together")
            if (target.fp8 is not None and fp8.is_block_linear_weight(key)
                    and key.removesuffix("weight") + "bias" not in expected):
                _convert_one(shard, key, target, out)
                continue
            tensor = get_tensor(handle, shard, key)
            out[key] = (_stored_fp8(shard, key, tensor, target) if _fp8_format(tensor)
                        else tensor.to(device=target.device, dtype=target.dtype))
    return unexpected


def _convert_one(shard: Path, key: str, target: _Target, out: dict[str, torch.Tensor]) -> None:
    """Quantize one block linear weight (own handle: its pages go when it closes)."""
    with open_shard(shard) as handle:
        tensor = get_tensor(handle, shard, key)
        if _fp8_format(tensor):
            out[key] = _stored_fp8(shard, key, tensor, target)
            return
        dtype = target.fp8_dtype(target.fp8)  # type: ignore[arg-type]
        out[key], out[key + "_scale"] = fp8.quantize(tensor.to(target.device), dtype, target.scale)
        del tensor


def _build(config: LLaDAConfig, state: dict[str, torch.Tensor], operations: Any,
           origin: dict[str, Path]) -> LLaDAModel:
    """Meta model from ``operations``, fp8 linears where the state holds fp8, then assign."""
    with torch.device("meta"):
        model = LLaDAModel(config, init_std=None, operations=operations)
    fp8_keys = {k for k, v in state.items() if _fp8_format(v)}
    if fp8_keys:
        with torch.device("meta"):
            fp8.use_fp8_linears(model)
    problem = fp8.scale_problem(state, fp8_keys, model.state_dict())
    if problem is not None:
        key, why = problem
        raise CheckpointError(f"{origin.get(key, '?')}: {why}; re-save the fp8 folder "
                              "(ladr_core.save_dimoo) or load the bf16 original")
    model.load_state_dict(state, strict=True, assign=True)
    return model.eval().requires_grad_(False)


def read_safetensors(folder: Path, config: LLaDAConfig, dtype: torch.dtype,
                     device: torch.device, weight_dtype: str | None = None,
                     fp8_scale: str = "channel", operations: Any = None) -> LLaDAModel:
    """The folder reader of the official and fp8 formats (module docstring; strict key check):
    ``weight_dtype``, an fp8 load choice, converts block linears while reading."""
    target = _Target(dtype, device, formats.check_load_choice(weight_dtype), fp8_scale)
    if fp8_scale not in fp8.SCALE_KINDS:
        raise ValueError(f"fp8_scale {fp8_scale!r} is not one of {list(fp8.SCALE_KINDS)}")
    if target.fp8 is not None:
        target.fp8_dtype(target.fp8)  # fail before reading anything
    shards = shard_files(folder)
    expected = formats.parameter_shapes(config)  # independent of the host's classes
    state: dict[str, torch.Tensor] = {}
    origin: dict[str, Path] = {}
    unexpected: dict[str, Path] = {}  # name -> the shard that holds it
    for shard, names in shards.items():
        unexpected.update(dict.fromkeys(_read_shard(shard, expected, names, target, state,
                                                    origin), shard))
    missing = sorted(set(expected) - set(state))
    if missing or unexpected:  # the files to blame: those with stray names, else every shard
        files = sorted({str(p) for p in (unexpected.values() if unexpected else shards)})
        raise CheckpointError(
            f"{', '.join(files[:3])}: weights do not match config.json (missing {missing[:4]}"
            f"{'...' if len(missing) > 4 else ''}, unexpected {sorted(unexpected)[:4]}); use the "
            "config.json shipped with these shards, or re-download the missing shard")
    return _build(config, state, operations, origin)


def load_transformer(folder: Path, config: LLaDAConfig, dtype: torch.dtype,
                     device: torch.device, weight_dtype: str | None = None,
                     fp8_scale: str = "channel", operations: Any = None) -> LLaDAModel:
    """The transformer of a checkpoint, read by the weight format its files are in
    (weights/formats/); ``weight_dtype``: a load choice or None / "default" (as stored)."""
    fmt = formats.stored_format(Path(folder))
    request = formats.LoadRequest(device, dtype, device, weight_dtype, fp8_scale, operations)
    return fmt.reader(request)(Path(folder), config, request)  # type: ignore[attr-defined]


def read_vq_config(folder: Path, ids: DiMOOIds) -> tuple[dict[str, Any], list[int]]:
    """``vqvae/config.json`` checked (sizes, codebook) and its block_out_channels."""
    vq_dir = vq_folder(folder)
    vq_config = read_json(vq_dir / "config.json", "the VQ-VAE config")
    channels = check_vq_config(vq_config, str(vq_dir / "config.json"))
    if vq_config.get("num_vq_embeddings") != ids.codebook_size:
        raise CheckpointError(
            f"{vq_dir / 'config.json'}: num_vq_embeddings {vq_config.get('num_vq_embeddings')} != "
            f"codebook_size {ids.codebook_size} of config.json; the VQ-VAE belongs to another model")
    return vq_config, channels


def load_vqvae(folder: Path, ids: DiMOOIds, device: torch.device) -> tuple[Any, int]:
    """diffusers ``VQModel`` from ``vqvae/`` (its config, then the weights under any name
    vqfiles.py reads, in float32) and its VQ factor."""
    vq_config, channels = read_vq_config(folder, ids)
    weights = vq_weight_files(vq_folder(folder))
    from diffusers import VQModel

    try:
        vq = VQModel.from_config(vq_config)
    except Exception as exc:
        raise CheckpointError(f"{vq_folder(folder) / 'config.json'} is not a diffusers VQModel "
                              f"config ({exc}); re-download the vqvae/ folder") from None
    state = read_vq_state(weights)
    want = vq.state_dict()
    bad = sorted(k for k in state if k in want and state[k].shape != want[k].shape)
    if set(state) != set(want) or bad:
        files = ", ".join(str(p) for p in list(weights.files)[:2])
        raise CheckpointError(
            f"{files}: the VQ-VAE weights do not match vqvae/config.json (missing "
            f"{sorted(set(want) - set(state))[:3]}, unexpected {sorted(set(state) - set(want))[:3]}"
            f", other shapes {bad[:3]}); re-download the vqvae/ folder")
    vq.load_state_dict(state, strict=True)
    del state
    return vq.to(device).eval().requires_grad_(False), 2 ** (len(channels) - 1)


def check_folder(folder: Path) -> tuple[LLaDAConfig, DiMOOIds, dict[str, Any]]:
    """Everything that refuses a folder before any weight is read: an unfinished conversion,
    config.json, the shards (index, files), vqvae/config.json and its weight files."""
    if not folder.is_dir():
        raise CheckpointError(f"model folder {folder} does not exist; {HUB_HINT} into it")
    unfinished = check_complete(folder)
    if unfinished:
        raise CheckpointError(unfinished)
    config, ids, raw = read_config(folder)
    shard_files(folder)
    read_vq_config(folder, ids)
    vq_weight_files(vq_folder(folder))
    return config, ids, raw


def load_checkpoint(path: str | Path, device: str | torch.device = "cpu",
                    dtype: torch.dtype | str = torch.bfloat16, weight_dtype: str | None = None,
                    fp8_scale: str = "channel", operations: Any = None,
                    weights_device: str | torch.device | None = None) -> LoadedCheckpoint:
    """Load transformer, tokenizer and VQ-VAE of a checkpoint in any registered weight format
    (``load_transformer``). ``dtype``: the compute dtype (and storage of what is not
    quantized); ``weights_device`` (default ``device``): where the transformer's weights go
    (the CPU for ``offload.stream_blocks``)."""
    folder = Path(path).expanduser()
    dtype = resolve_dtype(dtype)
    device = resolve_device(device)
    weights_at = device if weights_device is None else resolve_device(weights_device)
    fmt = formats.stored_format(folder)
    request = formats.LoadRequest(device, dtype, weights_at, weight_dtype, fp8_scale, operations)
    return _no_frames_kept(lambda: fmt.load(folder, request))


def _no_frames_kept(load: Callable[[], Any]) -> Any:
    """``load()``; its refusal raised afresh, outside the handler, so the error keeps no frame
    of the load (nor what it had read: nothing half-loaded stays alive while it is held)."""
    error: Exception | None = None
    try:
        return load()
    except (CheckpointError, ValueError) as exc:
        error = type(exc)(str(exc))
    raise error


def load_parts(folder: Path, request: formats.LoadRequest,
               read_transformer: Callable[[Path, LLaDAConfig, formats.LoadRequest], LLaDAModel]
               ) -> LoadedCheckpoint:
    """A checkpoint folder's parts (the folder formats' load): refusals before any read, then
    the tokenizer, the VQ and the transformer ``read_transformer`` reads."""
    config, ids, raw = check_folder(folder)
    tokenizer = load_tokenizer(folder, ids)
    vq, vq_factor = load_vqvae(folder, ids, request.device)
    transformer = read_transformer(folder, config, request)
    return LoadedCheckpoint(transformer, config, ids, tokenizer, vq, vq_factor, raw, folder)
