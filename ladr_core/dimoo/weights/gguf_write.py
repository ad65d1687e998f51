"""Write an official Lumina-DiMOO folder as one GGUF file (layout: gguf.py), tensor by tensor.

Recipes (GGML types per tensor; "_M" gives some layers' attention value and MLP output more
bits, as llama.cpp does): `Q8_0` every matrix Q8_0; `Q5_K_M` / `Q4_K_M` block linears and the
embedding Q5_K / Q4_K, but `v_proj` and `ff_out` of the first and last eighth of the blocks
and every third in between Q6_K, the output head Q6_K. Norms are F32; the VQ-VAE keeps its
float dtype. A matrix whose rows are not whole blocks of its type falls back to 256-weight
super-blocks over the flattened matrix when its size allows (nano's 128-wide rows), else Q8_0
or F16.

The header is written first, then each tensor is read from the memory-mapped source,
quantized on `device` and written (peak: about one tensor), under a hidden name renamed at
the end (staging.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from . import ggml
from .files import get_tensor, open_shard, read_config, shard_files
from .gguf import ARCH, KEYS, TRANSFORMER_PREFIX
from .staging import row_chunks, staged_file
from .vqfiles import vq_folder, vq_weight_files

__all__ = ["RECIPES", "tensor_type", "plan_gguf", "write_gguf", "more_bits"]

RECIPES = {"Q8_0": "Q8_0", "Q5_K_M": "Q5_K", "Q4_K_M": "Q4_K"}
FILE_TYPES = {"Q8_0": 7, "Q4_K_M": 15, "Q5_K_M": 17}  # gguf.LlamaFileType values
FLOAT_NAMES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}


def more_bits(layer: int, n_layers: int) -> bool:
    """llama.cpp's choice of layers whose value / MLP-output projections get Q6_K."""
    eighth = n_layers // 8
    return layer < eighth or layer >= 7 * n_layers // 8 or (layer - eighth) % 3 == 2


def _fits(kind: str, shape: list[int]) -> bool:
    return shape[-1] % ggml.block_bytes(kind)[0] == 0


def tensor_type(recipe: str, name: str, shape: list[int], n_layers: int) -> tuple[str, bool]:
    """(GGML type, flattened?) of transformer tensor ``name`` (official name without
    ``model.transformer.``) under ``recipe``."""
    if recipe not in RECIPES:
        raise ValueError(f"recipe {recipe!r} is not one of {list(RECIPES)}")
    if len(shape) == 1:
        return "F32", False
    parts = name.split(".")
    base = RECIPES[recipe]
    head = name == "ff_out.weight"
    boosted = parts[0] == "blocks" and parts[2] in ("v_proj", "ff_out") and \
        more_bits(int(parts[1]), n_layers)
    kind = "Q8_0" if recipe == "Q8_0" else "Q6_K" if head or boosted else base
    if _fits(kind, shape):
        return kind, False
    if parts[0] == "blocks" and kind != "Q8_0" and shape[0] * shape[1] % ggml.QK == 0:
        return kind, True
    return ("Q8_0", False) if _fits("Q8_0", shape) else ("F16", False)


def plan_gguf(source: Path, recipe: str) -> list[dict[str, Any]]:
    """Every tensor to write: name, source file and key, GGML type, stored shape, bytes."""
    config, _, _ = read_config(source)
    plan: list[dict[str, Any]] = []
    for shard in shard_files(source):
        with open_shard(shard) as handle:
            for key in list(handle.keys()):
                shape = list(handle.get_slice(key).get_shape())
                name = key.removeprefix(TRANSFORMER_PREFIX)
                kind, flat = tensor_type(recipe, name, shape, config.n_layers)
                stored = [shape[0] * shape[1] // ggml.QK, ggml.QK] if flat else shape
                plan.append({"name": name, "file": shard, "key": key, "type": kind,
                             "shape": stored})
    for vq in vq_weight_files(vq_folder(source)).files:  # any name the loader reads
        with open_shard(vq) as handle:
            for key in list(handle.keys()):
                sl = handle.get_slice(key)
                kind = {"F32": "F32", "F16": "F16", "BF16": "BF16"}.get(sl.get_dtype(), "F32")
                plan.append({"name": "vq." + key, "file": vq, "key": key, "type": kind,
                             "shape": list(sl.get_shape())})
    for item in plan:  # rows of the last dimension; the byte shape keeps the leading dims
        shape = item["shape"] or [1]
        item["rows"], item["n"] = int(np.prod(shape[:-1], dtype=np.int64)), shape[-1]
        item["byte_shape"] = [*shape[:-1], ggml.row_bytes(item["type"], shape[-1])]
        if len(item["name"]) >= 64:
            raise ValueError(f"tensor name {item['name']!r} is longer than GGUF's 63 characters")
    return plan


def _metadata(writer: Any, source: Path, recipe: str) -> None:
    config = json.loads((source / "config.json").read_text(encoding="utf-8"))
    config["ladr_weight_dtype"] = recipe
    writer.add_name(source.name)
    writer.add_file_type(FILE_TYPES[recipe])
    writer.add_quantization_version(2)
    writer.add_string(KEYS["config"], json.dumps(config))
    writer.add_string(KEYS["tokenizer"], (source / "tokenizer.json").read_text(encoding="utf-8"))
    writer.add_string(KEYS["vqvae"], (vq_folder(source) / "config.json").read_text(encoding="utf-8"))
    writer.add_string(KEYS["recipe"], recipe)


def write_gguf(source: str | Path, out: str | Path, recipe: str,
               device: str | torch.device = "cpu") -> Path:
    """Convert the official folder ``source`` to the GGUF file ``out`` (module docstring)."""
    from gguf import GGMLQuantizationType, GGUFWriter

    src, dst = Path(source).expanduser(), Path(out).expanduser()
    if dst.suffix.lower() != ".gguf":
        raise ValueError(f"{dst}: a GGUF output must end in .gguf")
    for need in ("config.json", "tokenizer.json", "vqvae/config.json"):
        if not (src / need).is_file():
            raise ValueError(f"{src / need} is missing; convert from the full official folder")
    plan = plan_gguf(src, recipe)
    with staged_file(dst) as tmp:
        writer = GGUFWriter(str(tmp), ARCH)
        _metadata(writer, src, recipe)
        for item in plan:
            writer.add_tensor_info(item["name"], item["byte_shape"], np.dtype(np.uint8),
                                   int(np.prod(item["byte_shape"], dtype=np.int64)),
                                   raw_dtype=GGMLQuantizationType[item["type"]])
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        try:
            for item in plan:
                with open_shard(item["file"]) as handle:
                    tensor = get_tensor(handle, item["file"], item["key"]).to(device)
                rows = tensor.reshape(item["rows"], item["n"])
                data = torch.empty((item["rows"], ggml.row_bytes(item["type"], item["n"])),
                                   dtype=torch.uint8)
                for part in row_chunks(rows.shape):  # bounded float32 temporaries
                    data[part] = ggml.quantize(rows[part], item["type"]).cpu()
                writer.write_tensor_data(data.reshape(item["byte_shape"]).numpy())
                del tensor, rows, data
        finally:
            writer.close()
    return dst
