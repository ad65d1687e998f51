"""The ONLY module of the pack that touches ComfyUI (docs/CONVENTIONS.md: a host-free core).

Every ComfyUI import (`comfy`, `comfy_api`, `folder_paths`, `server`) happens lazily inside a
function, so importing this module probes nothing. Without ComfyUI's runtime (`comfy` not
imported) each device, memory, progress and event function falls back to CPU / a no-op, which
is what lets the nodes' classmethods run under pytest.

V3 API version: `comfy_api.v0_0_2`, pinned: the newest numbered API of ComfyUI 0.33. It
re-exports what `comfy_api.latest` does, but unlike `latest` (documented as moving) a numbered
version is kept as an adapter when the API evolves, so saved workflows keep their schema.

Memory: the transformer is built from `model_operations`, wrapped with the VQ in two
ModelPatchers (`wrap_for_memory`) and loaded by `load_to_device` before each run.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import torch

MODEL_FOLDER = "lumina_dimoo"
"""folder_paths key: `models/lumina_dimoo/<name>/` and the extra_model_paths.yaml key."""


def _comfy_module(name: str) -> ModuleType | None:
    """Import a host module if we run inside ComfyUI (it is already in sys.modules then)."""
    if "comfy" not in sys.modules and not os.environ.get("LADR_FORCE_HOST_IMPORT"):
        return None
    try:
        return __import__(name, fromlist=["_"])
    except ImportError:
        return None


def v3() -> tuple[Any, type]:
    """(io module, ComfyExtension base) of the pinned V3 API: the one import of its version.
    The unit tests install a strict stand-in under that name (tests/kit/comfy_stand_in.py)."""
    try:
        from comfy_api.v0_0_2 import ComfyExtension, io  # noqa: PLC0415
    except ImportError as exc:
        raise ImportError("ComfyUI-LADR's nodes need ComfyUI >= 0.33 (its comfy_api.v0_0_2); "
                          "outside ComfyUI use the ladr_core package from Python") from exc
    return io, ComfyExtension


# ---------------------------------------------------------------- devices and dtypes
def torch_device() -> torch.device:
    """Compute device: ComfyUI's choice (`--cpu`, CUDA, MPS, ...) or CPU without the host."""
    mm = _comfy_module("comfy.model_management")
    return mm.get_torch_device() if mm else torch.device("cpu")


def offload_device() -> torch.device:
    """Where weights rest between runs (`unet_offload_device`), CPU without the host."""
    mm = _comfy_module("comfy.model_management")
    return mm.unet_offload_device() if mm else torch.device("cpu")


DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def pick_dtype(choice: str, device: torch.device) -> torch.dtype:
    """`auto`: bf16 where the device computes it well, else fp32 (CPU matmuls in fp16 are slow);
    inside ComfyUI its `unet_dtype` for the device (and its `--fp32-unet`-style flags)."""
    if choice not in DTYPES and choice != "auto":
        raise ValueError(f"dtype: {choice!r} is not one of auto, bf16, fp16, fp32")
    mm = _comfy_module("comfy.model_management")
    if choice in DTYPES:
        dtype = DTYPES[choice]
    elif mm is not None:
        dtype = mm.unet_dtype(device, supported_dtypes=[torch.bfloat16, torch.float32])
    else:
        dtype = torch.float32 if device.type == "cpu" else torch.bfloat16
    return _without_bf16(dtype, device, choice)


def _without_bf16(dtype: torch.dtype, device: torch.device, choice: str) -> torch.dtype:
    """float32 for bf16 on a GPU without bf16 tensor cores (before sm 8.0: T4, 20-series,
    V100), where torch emulates bf16 many times slower, or not at all; said in the log."""
    if dtype != torch.bfloat16 or device.type != "cuda" or \
            torch.cuda.is_bf16_supported(including_emulation=False):
        return dtype
    major, minor = torch.cuda.get_device_capability(device)
    logging.warning(f"ComfyUI-LADR: dtype {choice}: this GPU (compute capability {major}."
                    f"{minor}) has no bf16 tensor cores; loading in fp32 instead (choose fp16 "
                    "on the loader for half the memory, at the risk of overflow)")
    return torch.float32


# ---------------------------------------------------------------- model folders
def register_model_folder() -> None:
    """Register `models/lumina_dimoo` with folder_paths (idempotent; keeps yaml-added paths)."""
    fp = _comfy_module("folder_paths")
    if fp is None:
        return
    default = os.path.join(fp.models_dir, MODEL_FOLDER)
    fp.add_model_folder_path(MODEL_FOLDER, default, is_default=False)


EXAMPLE_INPUTS = Path(__file__).resolve().parents[1] / "example_workflows" / "inputs"


def install_example_inputs(source: Path = EXAMPLE_INPUTS) -> list[str]:
    """Copy the example workflows' input images into ComfyUI's input/ folder (templates run as
    opened); never replaces a file there, warns when it cannot write. Returns the names copied."""
    fp = _comfy_module("folder_paths")
    if fp is None or not source.is_dir():
        return []
    copied = []
    try:
        target = Path(fp.get_input_directory())
        target.mkdir(parents=True, exist_ok=True)
        for png in sorted(source.glob("*.png")):
            dest = target / png.name
            if not dest.exists():
                shutil.copyfile(png, dest)
                copied.append(png.name)
    except OSError as exc:
        logging.warning("ComfyUI-LADR: could not copy the example input images into ComfyUI's "
                        "input folder (%s); copy %s/*.png there by hand", exc, source)
    return copied


def model_folder_paths() -> list[str]:
    """Folders that may hold DiMOO checkpoints (one sub-folder per checkpoint)."""
    fp = _comfy_module("folder_paths")
    if fp is None:
        env = os.environ.get("LADR_MODELS_DIR")
        return [env] if env else []
    register_model_folder()
    return fp.get_folder_paths(MODEL_FOLDER)


# ---------------------------------------------------------------- memory management
def model_operations(fp8: bool = False, comfy_quant: bool = False, gguf: bool = False,
                     compute_dtype: torch.dtype | None = None) -> Any | None:
    """ComfyUI's layer classes for the transformer (None without the host = the core's own):
    ComfyUI's quantized format gets what ComfyUI picks for its own quantized checkpoints
    (``pick_operations`` with ``quant_config``: its fast fp8 / int8 matmuls, ``--fast``); fp8
    and GGUF weights ``manual_cast`` (cast or dequantized at use); else ``disable_weight_init``.
    All carry ``comfy_cast_weights``, so ModelPatcher can leave layers in RAM when VRAM is short
    (partial loading, --lowvram, --novram, --reserve-vram)."""
    ops = _comfy_module("comfy.ops")
    if ops is None:
        return None
    if comfy_quant:
        mm = _comfy_module("comfy.model_management")
        config = SimpleNamespace(quant_config={"mixed_ops": True})  # comfy.utils' own marker
        return ops.pick_operations(None, compute_dtype, load_device=mm.get_torch_device(),
                                   model_config=config)
    return ops.manual_cast if (fp8 or gguf) else ops.disable_weight_init


@dataclass
class Patchers:
    """ComfyUI ModelPatchers of one DiMOO: the transformer (may load partially) and the VQ
    (diffusers layers without ComfyUI casting: always loaded whole)."""

    transformer: Any
    vq: Any | None = None


def wrap_for_memory(transformer: torch.nn.Module, vq: torch.nn.Module | None = None
                    ) -> Patchers | None:
    """The weights in ComfyUI's ModelPatchers, so `load_models_gpu` can place / evict them."""
    mp = _comfy_module("comfy.model_patcher")
    if mp is None:
        return None
    cls = getattr(mp, "CoreModelPatcher", mp.ModelPatcher)
    load, offload = torch_device(), offload_device()
    # the VQ sits in a plain holder: diffusers' read-only `device` property would refuse the
    # `model.device = ...` that ModelPatcher writes
    holder = torch.nn.ModuleDict({"vq": vq}) if vq is not None else None
    vq_patcher = cls(holder, load_device=load, offload_device=offload) if holder is not None else None
    return Patchers(cls(transformer, load_device=load, offload_device=offload), vq_patcher)


def free_memory(device: torch.device) -> int | None:
    """Free bytes on a CUDA `device` for new work: ComfyUI's own figure inside the host (it
    counts what it can still evict), else CUDA's; None for any other device."""
    if device.type != "cuda":
        return None
    mm = _comfy_module("comfy.model_management")
    return int(mm.get_free_memory(device) if mm is not None else torch.cuda.mem_get_info(device)[0])


def load_to_device(patchers: Patchers | None, memory_required: int = 0,
                   vq_only: bool = False) -> None:
    """Ask ComfyUI to load the weights before a run, freeing other models if needed: the VQ
    whole, then (unless ``vq_only``) the transformer, partially when memory is short, keeping
    ``memory_required`` bytes free for the run (``pipe.run_memory`` / ``pipe.decode_bytes``)."""
    mm = _comfy_module("comfy.model_management")
    if mm is None or patchers is None:
        return
    if patchers.vq is not None:
        mm.load_models_gpu([patchers.vq], memory_required=memory_required if vq_only else 0,
                           force_full_load=True)
    if vq_only:
        return
    models = [patchers.transformer] + ([patchers.vq] if patchers.vq is not None else [])
    mm.load_models_gpu(models, memory_required=memory_required)


# ---------------------------------------------------------------- interrupts
class FallbackInterrupt(BaseException):
    """Raised by `check_interrupt` after `request_interrupt()` when ComfyUI is absent."""


_fallback_interrupt = False


def request_interrupt() -> None:
    """Host-free twin of ComfyUI's `interrupt_current_processing()` (for tests and the CLI)."""
    global _fallback_interrupt
    mm = _comfy_module("comfy.model_management")
    if mm is not None:
        mm.interrupt_current_processing(True)
        return
    _fallback_interrupt = True


def check_interrupt() -> None:
    """`throw_exception_if_processing_interrupted()`; the exception must propagate (BaseException)."""
    global _fallback_interrupt
    mm = _comfy_module("comfy.model_management")
    if mm is not None:
        mm.throw_exception_if_processing_interrupted()
        return
    if _fallback_interrupt:
        _fallback_interrupt = False
        raise FallbackInterrupt("processing interrupted")


# ---------------------------------------------------------------- progress and events
@dataclass
class Progress:
    """ComfyUI's ProgressBar (or nothing) for one node execution."""

    total: int
    bar: Any | None = None

    @classmethod
    def start(cls, total: int) -> Progress:
        utils = _comfy_module("comfy.utils")
        return cls(total, utils.ProgressBar(total) if utils else None)

    def update(self, value: int, preview: Any | None = None) -> None:
        """Absolute progress; `preview` is a PIL image shown at its own size (max_size None)."""
        if self.bar is None:
            return
        shown = ("JPEG", preview, None) if preview is not None else None
        self.bar.update_absolute(value, self.total, shown)


def save_temp_image(pil: Any, prefix: str = "ladr_preview") -> dict | None:
    """A PIL image saved as PNG in ComfyUI's temp folder -> the UI output entry showing it on a
    node ({"filename", "subfolder", "type": "temp"}); None outside ComfyUI."""
    paths = _comfy_module("folder_paths")
    if paths is None:
        return None
    name = f"{prefix}_{uuid.uuid4().hex[:12]}.png"
    pil.save(os.path.join(paths.get_temp_directory(), name), "PNG", compress_level=1)
    return {"filename": name, "subfolder": "", "type": "temp"}


def _server() -> Any | None:
    """ComfyUI's ``PromptServer.instance``, None without a server (the lab, tests)."""
    srv = _comfy_module("server")
    return getattr(getattr(srv, "PromptServer", None), "instance", None) if srv else None


def send_event(event: str, payload: dict) -> None:
    """`PromptServer.instance.send_sync(event, payload, sid)` to the client that queued the run."""
    if (instance := _server()) is not None:
        instance.send_sync(event, payload, getattr(instance, "client_id", None))


def add_prompt_handler(handler: Callable[[Any], Any]) -> bool:
    """``PromptServer.instance.add_on_prompt_handler``: ComfyUI hands `handler` each /prompt
    request's JSON before validating it and uses what it returns. False without a server."""
    instance = _server()
    if instance is None or not hasattr(instance, "add_on_prompt_handler"):
        return False
    instance.add_on_prompt_handler(handler)
    return True


HELP_PAGES = Path(__file__).resolve().parents[1] / "web" / "docs"
"""The node help pages, one per node: docs/<node_id>/en.md (English only)."""


def serve_help_in_every_language(pages: Path = HELP_PAGES) -> list[str]:
    """Frontend 1.49.6 asks for a node's help at .../docs/<node>/<locale>.md, then at
    .../docs/<node>.md. This answers the second with the English page, so a frontend in another
    language shows it instead of "Help not found". Registered (before the static routes) for
    each name ComfyUI serves the pack's web folder under; returns those names."""
    instance, nodes = _server(), _comfy_module("nodes")
    if instance is None or nodes is None:
        return []
    from aiohttp import web  # noqa: PLC0415

    async def english_page(request: web.Request) -> web.StreamResponse:
        node = request.match_info["node"]
        page = pages / node / "en.md"
        if not node.isidentifier() or not page.is_file():
            raise web.HTTPNotFound()
        return web.FileResponse(page, headers={"Content-Type": "text/markdown"})

    web_dir = pages.parent
    names = [name for name, folder in getattr(nodes, "EXTENSION_WEB_DIRS", {}).items()
             if Path(folder).resolve() == web_dir]
    for name in names:
        instance.routes.get(f"/extensions/{name}/docs/{{node}}.md")(english_page)
    return names
