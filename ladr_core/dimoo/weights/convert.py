"""Folder conversions shared by the weight formats (weights/formats/): an official folder
streamed tensor by tensor into a new folder in the official layout (``convert_folder`` with a
``Conversion``: the pack's fp8 or ComfyUI's quantized format), and the writing of shards, index
and support files that ``ladr_core.dimoo.save_dimoo`` uses too.

The layout: config.json (with an informative ``ladr_weight_dtype``), tokenizer files,
``vqvae/``, ``model-0000k-of-0000n.safetensors`` + index, written from the memory-mapped
source (peak: about one tensor beyond what is written) into a hidden staging folder renamed
at the end (staging.py).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from . import fp8, quant
from .files import INDEX_FILE, PICKLE_SUFFIXES, get_tensor, open_shard, read_config, shard_files
from .staging import check_target, row_chunks, staged_folder, write_safetensors
from .vqfiles import SHARED_VQ_KEY, vq_folder

__all__ = ["SHARD_BYTES", "Conversion", "by_rows", "check_paths", "convert_folder",
           "copy_support_files", "write_shards"]

SHARD_BYTES = 4 * 2**30
Entry = tuple[str, torch.dtype, list[int]]


def copy_support_files(source: Path, out: Path, weight_dtype: str) -> None:
    """config.json (+ ladr_weight_dtype), tokenizer and other small files, vqvae/ (a shared
    one copied in: the saved folder stands alone)."""
    if not (source / "vqvae").is_dir():
        shutil.copytree(vq_folder(source), out / "vqvae", dirs_exist_ok=True)
    for item in source.iterdir():
        if item.is_dir():
            if item.name == "vqvae":
                shutil.copytree(item, out / item.name, dirs_exist_ok=True)
            continue
        weights = item.suffix == ".safetensors" or item.name == INDEX_FILE
        if weights or item.suffix in PICKLE_SUFFIXES or item.suffix == ".py":
            continue
        if item.name == "config.json":
            config = json.loads(item.read_text(encoding="utf-8"))
            config["ladr_weight_dtype"] = weight_dtype
            config.pop(SHARED_VQ_KEY, None)
            (out / item.name).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        else:
            shutil.copy2(item, out / item.name)


def write_shards(out: Path, entries: list[Entry], produce: Callable[[str], torch.Tensor],
                  layers: dict[str, str], shard_bytes: int) -> None:
    """Group ``entries`` into shards of at most ``shard_bytes`` (a layer's tensors together),
    write each with ``write_safetensors`` and the index; ``layers`` {layer: ComfyUI format}."""
    groups: list[list[Entry]] = [[]]
    size = 0
    for entry in entries:
        n = torch.empty(0, dtype=entry[1]).element_size() * max(1, _numel(entry[2]))
        same_layer = groups[-1] and _layer(groups[-1][-1][0]) == _layer(entry[0])
        if groups[-1] and size + n > shard_bytes and not same_layer:
            groups.append([])
            size = 0
        groups[-1].append(entry)
        size += n
    weight_map: dict[str, str] = {}
    total = 0
    for i, group in enumerate(groups):
        name = f"model-{i + 1:05d}-of-{len(groups):05d}.safetensors"
        meta = {"format": "pt"}
        mine = {k: v for k, v in layers.items() if any(_layer(e[0]) == k for e in group)}
        if mine:
            meta[quant.METADATA_KEY] = json.dumps({"format_version": "1.0", "layers": {
                k: {"format": v} for k, v in sorted(mine.items())}})
        total += write_safetensors(out / name, group, produce, meta)
        weight_map.update({e[0]: name for e in group})
    (out / INDEX_FILE).write_text(json.dumps({"metadata": {"total_size": total},
                                              "weight_map": weight_map}, indent=1) + "\n")


def _numel(shape: list[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _layer(key: str) -> str:
    return key.rsplit(".", 1)[0]


def check_paths(src: Path, out: Path) -> None:
    check_target(out)
    if not (src / "config.json").is_file():
        raise ValueError(f"source {str(src)!r} has no config.json; pass the folder the model "
                         "was loaded from")
    if out.resolve() == src.resolve():
        raise ValueError("the output folder must differ from the source folder")


@dataclass
class Conversion:
    """What ``convert_folder`` makes of each block linear (``fmt``: an fp8 or ComfyUI save choice of weights/formats) and of the
    rest (``dtype``); ``input_amax`` {layer: calibrated amax incl. margin} for comfy fp8."""

    fmt: str
    dtype: torch.dtype = torch.bfloat16
    fp8_scale: str = "channel"
    int8_scale: str = "channel"
    input_amax: dict[str, float] = field(default_factory=dict)

    @property
    def comfy(self) -> str | None:
        return quant.WEIGHT_DTYPES.get(self.fmt)

    def outputs(self, key: str, shape: list[int], quantize: bool) -> list[Entry]:
        """(name, dtype, shape) of what ``convert`` makes of a source tensor of ``shape``."""
        if not quantize:
            return [(key, self.dtype, shape)]
        if self.comfy is None:
            return [(key, fp8.fp8_torch_dtype(self.fmt), shape), (key + "_scale", torch.float32,
                                                                  shape[:1])]
        layer = _layer(key)
        out = [(key, quant.storage_dtype(self.comfy), shape)]
        if self.comfy == "int8_tensorwise":
            return [*out, (layer + ".weight_scale", torch.float32,
                           [shape[0], 1] if self.int8_scale == "channel" else [])]
        out.append((layer + ".weight_scale", torch.float32, []))
        if layer in self.input_amax:
            out.append((layer + ".input_scale", torch.float32, []))
        return out

    def convert(self, key: str, tensor: torch.Tensor, quantize: bool) -> dict[str, torch.Tensor]:
        """Output tensors (name -> tensor) of one source tensor, computed in row chunks."""
        if not quantize:
            return {key: tensor.to(self.dtype)}
        if self.comfy is None:
            dtype = fp8.fp8_torch_dtype(self.fmt)
            if self.fp8_scale != "channel":  # one scale for the whole matrix
                q, s = fp8.quantize(tensor, dtype, self.fp8_scale)
                return {key: q, key + "_scale": s}
            return by_rows(tensor, lambda w: dict(zip(
                (key, key + "_scale"), fp8.quantize(w, dtype, "channel"), strict=True)))
        layer = _layer(key)
        per_tensor = self.comfy != "int8_tensorwise" or self.int8_scale == "tensor"
        amax = max(float(tensor[r].abs().amax()) for r in row_chunks(tensor.shape)) \
            if per_tensor else None
        parts = by_rows(tensor, lambda w: quant.quantize_layer(
            w, self.comfy, self.input_amax.get(layer), self.int8_scale, weight_amax=amax))
        return {f"{layer}.{name}": t for name, t in parts.items()}


def by_rows(tensor: torch.Tensor, fn: Callable[[torch.Tensor], dict[str, torch.Tensor]]
            ) -> dict[str, torch.Tensor]:
    """``fn`` over row chunks of ``tensor``; outputs with a row dimension are gathered into
    tensors of the full height, scalars come from the first chunk (they are equal)."""
    out: dict[str, torch.Tensor] = {}
    for rows in row_chunks(tensor.shape):
        for name, part in fn(tensor[rows]).items():
            if part.dim() == 0:
                out.setdefault(name, part)
                continue
            if name not in out:
                out[name] = torch.empty((tensor.shape[0], *part.shape[1:]), dtype=part.dtype,
                                        device=part.device)
            out[name][rows] = part
    return out


def convert_folder(source: str | Path, out: str | Path, conversion: Conversion,
                   device: str | torch.device = "cpu", shard_bytes: int = SHARD_BYTES) -> Path:
    """Stream the official folder ``source`` into ``out`` converted by ``conversion`` (module
    docstring); each tensor is read, converted on ``device`` and written before the next."""
    src, dst = Path(source).expanduser(), Path(out).expanduser()
    check_paths(src, dst)
    config, _, _ = read_config(src)
    biased = config.include_bias or bool(config.include_qkv_bias)
    plan: list[tuple[Path, str, bool]] = []
    for shard in shard_files(src):
        with open_shard(shard) as handle:
            for key in list(handle.keys()):
                is_q = fp8.is_block_linear_weight(key) and not biased
                if handle.get_slice(key).get_dtype().startswith("F8"):
                    raise ValueError(f"{shard}: {key} is already fp8; convert from the bf16 "
                                     "original release")
                plan.append((shard, key, is_q))
    entries, sources = _entries(plan, conversion)
    cache: dict[str, torch.Tensor] = {}

    def produce(name: str) -> torch.Tensor:
        if name not in cache:
            shard, key, is_q = sources[name]
            with open_shard(shard) as handle:
                tensor = get_tensor(handle, shard, key).to(device)
            cache.clear()  # the previous layer's outputs are written by now
            cache.update({k: v.cpu() for k, v in conversion.convert(key, tensor, is_q).items()})
            del tensor
        return cache.pop(name)

    layers = {_layer(k): conversion.comfy for _, k, q in plan if q and conversion.comfy}
    with staged_folder(dst) as tmp:
        copy_support_files(src, tmp, conversion.comfy or conversion.fmt)
        write_shards(tmp, entries, produce, layers, shard_bytes)
    return dst


def _entries(plan: list[tuple[Path, str, bool]], conversion: Conversion
             ) -> tuple[list[Entry], dict[str, tuple[Path, str, bool]]]:
    """Output (name, dtype, shape) in writing order, each mapped to its source tensor."""
    entries: list[Entry] = []
    sources: dict[str, tuple[Path, str, bool]] = {}
    for shard, key, is_q in plan:
        with open_shard(shard) as handle:
            shape = list(handle.get_slice(key).get_shape())
        for entry in conversion.outputs(key, shape, is_q):
            entries.append(entry)
            sources[entry[0]] = (shard, key, is_q)
    return entries, sources
