"""Load DiMOO Model: a checkpoint folder (official layout) or a GGUF file -> LADR_DIMOO_MODEL
(web/docs/LADR_LoadDiMOOModel/en.md). A refused folder's error carries the report of
`python -m ladr_core.doctor`. The loaded pipeline is cached across queue runs, keyed on (path,
its mtime, dtype, device[, weight_dtype]); changing an input reloads.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

import ladr_core
from ladr_core.dimoo import INCOMPLETE_MARKER, CheckpointError, formats

from . import host, register_node
from .handles import MODEL_TYPE, DiMOOModel
from .validate import ABSENT

io, _ = host.v3()

NANO = "dimoo-nano (built-in)"
NANO_MMU = "dimoo-nano-mmu (built-in)"
EMOJI = "dimoo-emoji (built-in)"
BUILT_IN = {NANO: "nano_model_path", NANO_MMU: "nano_mmu_model_path", EMOJI: "emoji_model_path"}
"""The shipped checkpoints (choice -> the ladr_core function giving its folder): the nano that
draws, its sibling that draws the same scenes and also answers questions about them, and
dimoo-emoji, which draws 24 emoji (Noto and Twemoji styles; it cannot answer)."""
DTYPE_CHOICES = ["auto", "bf16", "fp16", "fp32"]
_CACHE: dict[tuple, DiMOOModel] = {}


def root_choice(root: str) -> str:
    """The choice of a checkpoint placed straight into model folder ``root``, not a sub-folder."""
    return f"{os.path.basename(os.path.normpath(root))}/ (the folder itself)"


def _is_checkpoint(path: str) -> bool:
    """A folder with a config.json whose conversion finished."""
    return os.path.isfile(os.path.join(path, "config.json")) and \
        not os.path.exists(os.path.join(path, INCOMPLETE_MARKER))


def _one_file(name: str) -> bool:
    """Whether ``name`` ends as a one-file weight format's files do (a .gguf file, ...)."""
    return name.lower().endswith(formats.file_suffixes())


def _listed(root: str, name: str) -> str | None:
    """The choice name of entry ``name`` of a model folder, or None when it is not a model."""
    path = os.path.join(root, name)
    if name.startswith(".") or name == "vqvae":
        return None  # hidden (a converter's staging folder or file), or a checkpoint's VQ
    if _one_file(name) and os.path.isfile(path):
        return name
    return name if _is_checkpoint(path) else None


def model_choices() -> list[str]:
    """[the built-in models] + sorted checkpoints of every model folder: the folder itself,
    its checkpoint sub-folders and one-file weights (GGUF; also one folder down: sub/x.gguf)."""
    found: set[str] = set()
    for root in host.model_folder_paths():
        if not os.path.isdir(root):
            continue
        if _is_checkpoint(root):
            found.add(root_choice(root))
        for name in os.listdir(root):
            choice = _listed(root, name)
            if choice is not None:
                found.add(choice)
            elif os.path.isdir(os.path.join(root, name)) and not name.startswith("."):
                sub = os.path.join(root, name)
                found.update(f"{name}/{g}" for g in os.listdir(sub)
                             if _one_file(g) and _listed(sub, g) == g)
    return [*BUILT_IN, *sorted(found)]


def resolve_model_path(model_name: str) -> str:
    """Folder or GGUF file of `model_name`; a clear error naming the searched folders."""
    if not isinstance(model_name, str):  # a workflow file's null, number or object
        raise ValueError(f"model_name: {model_name!r} is not a model name; pick one from the "
                         f"list ({NANO!r} is built in)")
    if model_name in BUILT_IN:
        nano = getattr(ladr_core, BUILT_IN[model_name])()
        if not os.path.isfile(os.path.join(nano, "config.json")):
            raise ValueError(f"model_name: the built-in {model_name.split()[0]} checkpoint is "
                             f"missing from this install ({nano}); reinstall ComfyUI-LADR or "
                             "pick a folder model.")
        return str(nano)
    parts = model_name.replace("\\", "/").split("/")
    if os.path.isabs(model_name) or os.path.splitdrive(model_name)[0] or ".." in parts:
        raise ValueError(f"model_name: {model_name!r} points outside the lumina_dimoo model "
                         "folders (a shared workflow may name any path); put the checkpoint in "
                         "models/lumina_dimoo/ and pick its name from the list")
    roots = host.model_folder_paths()
    for root in roots:
        if model_name == root_choice(root) and _is_checkpoint(root):
            return root
    one_file = formats.stored_format(Path(model_name)) if _one_file(model_name) else None
    for root in roots:
        path = os.path.join(root, model_name)
        if os.path.isfile(path) if one_file else os.path.isfile(os.path.join(path, "config.json")):
            return path
    where = ", ".join(roots) if roots else "(no lumina_dimoo model folder is registered)"
    if one_file:
        make = f" (make one with {one_file.make_command()})" if one_file.make_command() else ""
        raise ValueError(
            f"model_name: {one_file.label} {model_name!r} was not found in {where}. Put it at "
            f"models/lumina_dimoo/{model_name} and refresh{make}, or pick {NANO!r}.")
    raise ValueError(
        f"model_name: checkpoint folder {model_name!r} with a config.json was not found in "
        f"{where}. Put the official Lumina-DiMOO folder (config.json, *.safetensors, tokenizer "
        f"files, vqvae/) at models/lumina_dimoo/{model_name}/ and refresh, or pick "
        f"{NANO!r}."
    )


def model_grid(model_name: object) -> int | None:
    """Pixels per token side of checkpoint ``model_name``, from its VQ config without loading it;
    None when not known so (a GGUF file, a name not installed)."""
    try:
        path = resolve_model_path(model_name)  # type: ignore[arg-type]
    except ValueError:
        return None
    return ladr_core.vq_factor_of(path) if os.path.isdir(path) else None


def grid_table() -> dict[str, int]:
    """For web/ladr_canvas_grid.js: each listed choice whose grid is known -> its grid."""
    return {name: grid for name in model_choices() if (grid := model_grid(name)) is not None}


def load_model(model_name: str, dtype: str, weight_dtype: str = "default") -> DiMOOModel:
    """Load (or reuse) the pipeline for these loader inputs and wrap it for ComfyUI memory."""
    path = resolve_model_path(model_name)
    device = host.torch_device()
    torch_dtype = host.pick_dtype(dtype, device)
    stored = formats.stored_format(Path(path))  # the weight format its files are in
    one_file = stored.suffix is not None
    mtime = os.path.getmtime(path if one_file else os.path.join(path, "config.json"))
    key = (os.path.realpath(path), mtime, str(torch_dtype), str(device))
    if weight_dtype != "default":  # old keys unchanged: the tokens' model_key stays the same
        key = (*key, weight_dtype)
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    _CACHE.clear()  # one DiMOO at a time: drop the old one before loading the next
    # Loaded onto the offload device: host.load_to_device moves the weights before each run.
    kind = stored.operations(weight_dtype)  # which of ComfyUI's layer classes run it
    ops = host.model_operations(**({kind: True} if kind else {}), compute_dtype=torch_dtype)
    try:
        pipe = load_pipeline(path, host.offload_device(), torch_dtype,
                             weight_dtype=None if weight_dtype == "default" else weight_dtype,
                             operations=ops)
    except CheckpointError as exc:
        if one_file:  # the doctor reads folders
            raise
        error = CheckpointError(f"{exc}\n\n{ladr_core.diagnose(path)[0]}")  # python -m ladr_core.doctor
    else:
        return _remember(pipe, key, model_name)
    raise error


def _remember(pipe: object, key: tuple, model_name: str) -> DiMOOModel:
    """The loaded pipeline wrapped for ComfyUI's memory management, cached under ``key``."""
    vq = pipe.vq if isinstance(getattr(pipe, "vq", None), torch.nn.Module) else None
    patchers = host.wrap_for_memory(pipe.transformer, vq) if hasattr(pipe, "transformer") else None
    handle = DiMOOModel(pipe=pipe, key=key, name=model_name, patcher=patchers)
    _CACHE[key] = handle
    return handle


def load_pipeline(path: str, device: object, dtype: object, weight_dtype: str | None = None,
                  operations: object = None) -> object:
    """`ladr_core.load_dimoo`: one seam for tests to substitute."""
    return ladr_core.load_dimoo(path, device=device, dtype=dtype, weight_dtype=weight_dtype,
                                operations=operations)


def one_file_formats() -> dict[str, str]:
    """For the web extension's missing-checkpoint notice: {".gguf": "GGUF file", ...}."""
    return {f.suffix: f.label for f in formats.weight_formats() if f.suffix}


def weight_dtype_tooltip() -> str:
    """The weight_dtype widget's words: each registered format's line about its choices."""
    lines = [f.describe() for f in formats.weight_formats() if f.describe()]
    return " ".join(["Storage of the transformer blocks' linear weights.", *lines])


@register_node(menu=10)
class LoadDiMOOModel(io.ComfyNode):
    """Load a Lumina-DiMOO checkpoint (transformer + tokenizer + VQ) for LADR sampling."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="LADR_LoadDiMOOModel",
            display_name="Load DiMOO Model",
            category="LADR",
            search_aliases=["lumina", "dimoo", "lumina-dimoo", "load checkpoint"],
            description="Loads a Lumina-DiMOO checkpoint folder (official layout, or "
            "converted to fp8 / ComfyUI's quantized format) or a GGUF file from "
            "models/lumina_dimoo/, or a small built-in model that runs on a CPU.",
            inputs=[
                io.Combo.Input(
                    "model_name", options=model_choices(), default=NANO,
                    extra_dict={"ladr_files": one_file_formats(), "ladr_grids": grid_table()},
                    tooltip="Checkpoint folder or .gguf file under models/lumina_dimoo/ (or an "
                    "extra_model_paths.yaml 'lumina_dimoo:' path). 8B weights: bf16 folder 15 "
                    "GiB (24 GB cards); fp8 or ComfyUI fp8 / int8 folder about 8.6 GB (12-16 "
                    "GB cards; ComfyUI fp8 runs the fast fp8 matmul on RTX 40xx / H100); GGUF "
                    "Q8_0 8.6 GB, Q4_K_M about 5 GB (8 GB cards). Make them with python -m "
                    "ladr_core.dimoo.save. The built-in models are tiny and CPU-friendly (48 px): "
                    "dimoo-nano draws coloured shapes, dimoo-nano-mmu also answers questions "
                    "about its pictures (DiMOO Caption, DiMOO Ask), dimoo-emoji draws emoji.",
                ),
                io.Combo.Input(
                    "dtype", options=DTYPE_CHOICES, default="auto",
                    tooltip="Weight dtype. auto: bf16 where the device supports it well, "
                    "fp32 on CPU.",
                ),
                io.Combo.Input(
                    "weight_dtype", options=formats.load_choices(), default="default",
                    optional=True, tooltip=weight_dtype_tooltip(),
                ),
            ],
            outputs=[io.Custom(MODEL_TYPE).Output("model", tooltip="DiMOO model handle.")],
        )

    @classmethod
    def validate_inputs(cls, model_name: object = ABSENT) -> bool | str:
        """Names only `model_name`, so its error shows once, on it (nodes/validate.py)."""
        if model_name is ABSENT:  # not in the prompt: ComfyUI reports it missing
            return True
        try:
            resolve_model_path(model_name)
        except ValueError as exc:
            return str(exc)
        return True

    @classmethod
    def execute(cls, model_name: str, dtype: str, weight_dtype: str = "default") -> io.NodeOutput:
        return io.NodeOutput(load_model(model_name, dtype, weight_dtype))
