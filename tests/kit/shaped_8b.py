"""The 8B model's shape on the CUDA emulation (tests/kit/cuda_emu, ``storage="meta"``: shapes
only), as the pack's own pipeline runs it, for memory checks at the real sizes: a queue of
prompts through ``pipe.generate`` on an emulated card (tests/emulation/test_queue_memory.py and
its put-back cases).

* ``pipeline_8b(vq=...)``: a ``DiMOOPipeline`` around LLaDA-8B's shape (``real_repo.LLADA_8B``
  at the DiMOO head width 134,656, bf16 weights made on the current device without values), a
  word tokenizer stand-in, and optionally the 8B checkpoint's VQ (``vq_8b.VQ_CONFIG``) without a
  preview table, as the real repository ships none.
* ``finish_after(calls)``: the sampler's one host read per step replaced for a shape-only run,
  which has no counts to read: each image finishes after ``calls`` denoiser calls, so a queue
  rolls through the images in flight as it would on a card.
* ``within_grant(emu, grant)``: the allocation that takes the live bytes more than ``grant``
  beyond those at entry raises, naming the pack's lines that asked (the memory plan checked
  against allocated bytes, which a card's fragmentation does not blur).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any
from unittest import mock

import torch

from ladr_core import sampling
from ladr_core.dimoo import DiMOOPipeline
from ladr_core.dimoo.model.config import DiMOOIds, LLaDAConfig
from ladr_core.dimoo.model.transformer import LLaDAModel
from ladr_core.dimoo.weights.files import LoadedCheckpoint

from .cuda_emu.where import trail
from .real_repo import LLADA_8B
from .vq_8b import VQ_CONFIG

__all__ = ["MemoryGrantError", "WIDTH_8B", "config_8b", "finish_after", "pipeline_8b",
           "within_grant"]

WIDTH_8B = 134656  # the DiMOO head: 126,464 text rows and 8,192 image codes, padded to 128


def config_8b(layers: int = 32) -> LLaDAConfig:
    """LLaDA-8B's config.json at the DiMOO head width; ``layers`` below 32 keeps every width with
    fewer blocks (a quicker run, less K/V per image)."""
    return LLaDAConfig.from_dict({**LLADA_8B, "embedding_size": WIDTH_8B,
                                  "vocab_size": WIDTH_8B, "n_layers": layers})


class _Words:
    """Each word one id below the image codes (about as many tokens as words)."""

    def __init__(self, ids: DiMOOIds) -> None:
        self.first = 1000

    def encode(self, text: str, add_special_tokens: bool = False) -> Any:
        return SimpleNamespace(ids=[self.first + len(w) for w in text.split()])


def _vq(device: torch.device, codes: int = 8192) -> Any:
    from diffusers import VQModel

    with torch.device("meta"):
        vq = VQModel.from_config({**VQ_CONFIG, "num_vq_embeddings": codes})
    return vq.to_empty(device=device).eval().requires_grad_(False)


def pipeline_8b(layers: int = 32, vq: bool = False, device: str = "cuda",
                vq_codes: int = 8192) -> DiMOOPipeline:
    """The 8B-shaped pipeline (module docstring), weights in bf16 on ``device``; ``vq_codes``
    below 8,192 keeps the VQ's layers with a smaller codebook (building a preview table then
    takes fewer decoder calls of the same size)."""
    config = config_8b(layers)
    ids = DiMOOIds.from_config_dict({}, width=WIDTH_8B)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("meta"):
            model = LLaDAModel(config, init_std=None)
    finally:
        torch.set_default_dtype(previous)
    model = model.to_empty(device=torch.device(device)).eval().requires_grad_(False)
    loaded = LoadedCheckpoint(model, config, ids, _Words(ids), _vq(torch.device(device), vq_codes)
                              if vq else None, 16, {"default_image_size": 1024}, None)
    pipe = DiMOOPipeline(loaded)
    pipe.compute_dtype = torch.bfloat16
    return pipe


@contextlib.contextmanager
def finish_after(calls: int) -> Iterator[None]:
    """Inside the block, ``sample()``'s per-step read says each running image is done once it
    has run ``calls`` steps (module docstring); the rest of the loop is the sampler's own."""

    def sync_counts(run: Any) -> bool:
        slots = run.slots
        slots.counts = [0 if item < 0 or slots.ran[s] >= calls else 1
                        for s, item in enumerate(slots.item)]
        run.turnover()
        return bool(slots.active())

    with mock.patch.object(sampling.SampleRun, "sync_counts", sync_counts):
        yield


class MemoryGrantError(RuntimeError):
    """A run held more device memory than the plan granted it."""


@contextlib.contextmanager
def within_grant(emu: Any, grant: int) -> Iterator[None]:
    """Inside the block, an allocation past ``grant`` bytes beyond the entry's raises
    MemoryGrantError("[cuda-emulation:memory] ... at file:line (function) <- ...")."""
    memory = emu.memory
    malloc, start = memory.malloc, memory.allocated

    def counted(nbytes: int) -> int:
        handle = malloc(nbytes)
        if memory.allocated - start > grant:
            raise MemoryGrantError(
                f"[cuda-emulation:memory] {(memory.allocated - start) / 2 ** 30:.2f} GiB held "
                f"past the {grant / 2 ** 30:.2f} GiB the plan granted, at {trail()}")
        return handle

    memory.malloc = counted
    try:
        yield
    finally:
        del memory.malloc
