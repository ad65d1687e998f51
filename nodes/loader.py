"""Load DiMOO Model: a checkpoint folder (official layout) -> LADR_DIMOO_MODEL.

Choices are the sub-folders of every `lumina_dimoo` model folder ComfyUI knows (its
`models/lumina_dimoo/` plus any `lumina_dimoo:` path from extra_model_paths.yaml) that hold a
`config.json`, and the built-in nano checkpoint. The loaded pipeline is cached across queue
runs, keyed on (folder, its config.json mtime, dtype, device[, weight_dtype]); changing an input
reloads. The optional `weight_dtype` input (absent in older saved workflows = "default") stores
the block linears in fp8. Inside ComfyUI the transformer is built from `comfy.ops` classes and
wrapped in a ModelPatcher, so it loads partially when VRAM is short (--lowvram, --novram,
--reserve-vram apply); the VQ has its own patcher and is always loaded whole.
"""

from __future__ import annotations

import os

import torch

import ladr_core

from . import host
from .handles import MODEL_TYPE, DiMOOModel

io, _ = host.v3()

NANO = "dimoo-nano (built-in)"
DTYPE_CHOICES = ["auto", "bf16", "fp16", "fp32"]
WEIGHT_DTYPE_CHOICES = ["default", "fp8_e4m3fn", "fp8_e5m2"]  # ladr_core.dimoo.fp8.WEIGHT_DTYPES
_CACHE: dict[tuple, DiMOOModel] = {}


def model_choices() -> list[str]:
    """[built-in nano] + sorted checkpoint sub-folders (those with a config.json)."""
    found: set[str] = set()
    for root in host.model_folder_paths():
        if not os.path.isdir(root):
            continue
        for name in os.listdir(root):
            if os.path.isfile(os.path.join(root, name, "config.json")):
                found.add(name)
    return [NANO, *sorted(found)]


def resolve_model_path(model_name: str) -> str:
    """Folder of `model_name`; a clear error naming the searched folders when it is missing."""
    if model_name == NANO:
        nano = ladr_core.nano_model_path()
        if not os.path.isfile(os.path.join(nano, "config.json")):
            raise ValueError(f"model_name: the built-in nano checkpoint is missing from this "
                             f"install ({nano}); reinstall ComfyUI-LADR or pick a folder model.")
        return str(nano)
    roots = host.model_folder_paths()
    for root in roots:
        path = os.path.join(root, model_name)
        if os.path.isfile(os.path.join(path, "config.json")):
            return path
    where = ", ".join(roots) if roots else "(no lumina_dimoo model folder is registered)"
    raise ValueError(
        f"model_name: checkpoint folder {model_name!r} with a config.json was not found in "
        f"{where}. Put the official Lumina-DiMOO folder (config.json, *.safetensors, tokenizer "
        f"files, vqvae/) at models/lumina_dimoo/{model_name}/ and refresh, or pick "
        f"{NANO!r}."
    )


def load_model(model_name: str, dtype: str, weight_dtype: str = "default") -> DiMOOModel:
    """Load (or reuse) the pipeline for these loader inputs and wrap it for ComfyUI memory."""
    path = resolve_model_path(model_name)
    device = host.torch_device()
    torch_dtype = host.pick_dtype(dtype, device)
    mtime = os.path.getmtime(os.path.join(path, "config.json"))
    key = (os.path.realpath(path), mtime, str(torch_dtype), str(device))
    if weight_dtype != "default":  # old keys unchanged: the tokens' model_key stays the same
        key = (*key, weight_dtype)
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    _CACHE.clear()  # one DiMOO at a time: drop the old one before loading the next
    # Load onto the offload device; ComfyUI's load_models_gpu (host.load_to_device) moves the
    # weights to `device` before each run (partially when VRAM is short), after freeing memory
    # held by other models. Layers are built from ComfyUI's operations so that works.
    extra: dict[str, object] = {}
    ops = host.model_operations(fp8=weight_dtype != "default")
    if ops is not None:
        extra["operations"] = ops
    if weight_dtype != "default":
        extra["weight_dtype"] = weight_dtype
    pipe = load_pipeline(path, host.offload_device(), torch_dtype, **extra)
    vq = pipe.vq if isinstance(getattr(pipe, "vq", None), torch.nn.Module) else None
    patchers = host.wrap_for_memory(pipe.transformer, vq) if hasattr(pipe, "transformer") else None
    handle = DiMOOModel(pipe=pipe, key=key, name=model_name, patcher=patchers)
    _CACHE[key] = handle
    return handle


def load_pipeline(path: str, device: object, dtype: object, **options: object) -> object:
    """`ladr_core.load_dimoo` (ARCHITECTURE.md Sec. 2); one seam for tests to substitute.
    ``options``: `weight_dtype`, `operations` (only passed when set)."""
    return ladr_core.load_dimoo(path, device=device, dtype=dtype, **options)


class LoadDiMOOModel(io.ComfyNode):
    """Load a Lumina-DiMOO checkpoint (transformer + tokenizer + VQ) for LADR sampling."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="LADR_LoadDiMOOModel",
            display_name="Load DiMOO Model",
            category="LADR",
            search_aliases=["lumina", "dimoo", "lumina-dimoo", "load checkpoint"],
            description="Loads a Lumina-DiMOO checkpoint folder (official layout) from "
            "models/lumina_dimoo/, or the small built-in nano model that runs on a CPU.",
            inputs=[
                io.Combo.Input(
                    "model_name", options=model_choices(), default=NANO,
                    tooltip="Checkpoint folder under models/lumina_dimoo/ (or an "
                    "extra_model_paths.yaml 'lumina_dimoo:' path). The built-in nano model is "
                    "tiny and CPU-friendly; the real 8B Lumina-DiMOO needs a GPU.",
                ),
                io.Combo.Input(
                    "dtype", options=DTYPE_CHOICES, default="auto",
                    tooltip="Weight dtype. auto: bf16 where the device supports it well, "
                    "fp32 on CPU.",
                ),
                io.Combo.Input(
                    "weight_dtype", options=WEIGHT_DTYPE_CHOICES, default="default",
                    optional=True,
                    tooltip="Storage of the transformer blocks' linear weights. default: as the "
                    "folder stores them (in `dtype`). fp8_e4m3fn / fp8_e5m2: 8-bit with a scale "
                    "per output channel, computed in `dtype` (about half the memory of bf16; "
                    "e4m3fn is the more accurate). A folder saved in fp8 loads as saved.",
                ),
            ],
            outputs=[io.Custom(MODEL_TYPE).Output("model", tooltip="DiMOO model handle.")],
        )

    @classmethod
    def validate_inputs(cls, model_name: str) -> bool | str:
        """Only `model_name` is named, so its error shows once, on it; dtype is a COMBO the
        schema checks itself (nodes/validate.py)."""
        try:
            resolve_model_path(model_name)
        except ValueError as exc:
            return str(exc)
        return True

    @classmethod
    def execute(cls, model_name: str, dtype: str, weight_dtype: str = "default") -> io.NodeOutput:
        return io.NodeOutput(load_model(model_name, dtype, weight_dtype))
