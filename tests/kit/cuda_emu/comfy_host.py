"""ComfyUI's model management as the pack's node path meets it (nodes/host.py), for runs on
the emulated device: the compute device is ``cuda:0``, models rest on the CPU (the offload
device), ``load_models_gpu`` moves a ModelPatcher's model to the device whole, or partly when
a VRAM budget is set (the transformer's blocks that do not fit stay on the CPU and are copied
over at use and back after, as ComfyUI's low-VRAM casting does), and ``unload_all_models``
offloads between runs.

Not ComfyUI's code: a stand-in with its function names and behaviour, because ComfyUI cannot be
imported beside this CPU-only torch (its packages need a CUDA build of torch and torchvision).
The weights a partial load streams are the host's own copies: they are counted in
``EmulationState.host_copies``, not as the pack's transfers.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch

from .state import active

OFFLOAD = torch.device("cpu")
DEVICE = torch.device("cuda", 0)


class ModelPatcher:
    def __init__(self, model: torch.nn.Module, load_device: Any, offload_device: Any) -> None:
        self.model, self.load_device, self.offload_device = model, load_device, offload_device
        self.streamed: list[Any] = []

    def model_size(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.model.state_dict().values())


def _stream(layer: torch.nn.Module) -> list[Any]:
    """Copy ``layer``'s own weights to the device for each call and back after (a low-VRAM
    cast at use)."""

    def before(module: torch.nn.Module, args: Any) -> None:
        with active().host_streaming():
            module.to(DEVICE)

    def after(module: torch.nn.Module, args: Any, out: Any) -> None:
        with active().host_streaming():
            module.to(OFFLOAD)

    return [layer.register_forward_pre_hook(before), layer.register_forward_hook(after)]


def _blocks(model: torch.nn.Module) -> torch.nn.ModuleList | None:
    return next((m for n, m in model.named_modules()
                 if n.endswith("blocks") and isinstance(m, torch.nn.ModuleList)), None)


class ModelManagement:
    """The functions of ``comfy.model_management`` the nodes call."""

    def __init__(self, vram_budget: int | None = None) -> None:
        self.vram_budget = vram_budget  # bytes a partial load may place; None: load whole
        self.loaded: list[ModelPatcher] = []
        self.calls: list[tuple[str, int, bool]] = []

    def load_models_gpu(self, models: list[ModelPatcher], memory_required: int = 0,
                        force_full_load: bool = False) -> None:
        for patcher in models:
            self.calls.append((type(patcher.model).__name__, memory_required, force_full_load))
            if patcher in self.loaded:
                continue
            patcher.model.to(DEVICE)
            if hasattr(patcher.model, "device"):
                patcher.model.device = DEVICE  # as ModelPatcher keeps it
            blocks = _blocks(patcher.model)
            if self.vram_budget is not None and not force_full_load and blocks is not None:
                self._partial(patcher, blocks)
            self.loaded.append(patcher)

    def _partial(self, patcher: ModelPatcher, blocks: torch.nn.ModuleList) -> None:
        """The blocks past the budget go back to the CPU and are streamed at use."""
        budget = self.vram_budget
        for block in blocks:
            size = sum(p.numel() * p.element_size() for p in block.parameters())
            if size <= budget:
                budget -= size
                continue
            block.to(OFFLOAD)
            for leaf in block.modules():  # cast at use, layer by layer, as comfy.ops does
                if any(True for _ in leaf.parameters(recurse=False)):
                    patcher.streamed += _stream(leaf)

    def unload_all_models(self) -> None:
        for patcher in self.loaded:
            for hook in patcher.streamed:
                hook.remove()
            patcher.streamed = []
            patcher.model.to(OFFLOAD)
            if hasattr(patcher.model, "device"):
                patcher.model.device = OFFLOAD
        self.loaded = []

    def modules(self) -> dict[str, Any]:
        mm = SimpleNamespace(
            get_torch_device=lambda: DEVICE, unet_offload_device=lambda: OFFLOAD,
            unet_dtype=lambda device=None, supported_dtypes=(), **kw: torch.float32,
            get_free_memory=lambda device=None: torch.cuda.mem_get_info()[0],
            load_models_gpu=self.load_models_gpu, unload_all_models=self.unload_all_models,
            interrupt_current_processing=lambda value=True: None,
            throw_exception_if_processing_interrupted=lambda: None,
            processing_interrupted=lambda: False)
        return {"comfy.model_management": mm,
                "comfy.model_patcher": SimpleNamespace(ModelPatcher=ModelPatcher)}
