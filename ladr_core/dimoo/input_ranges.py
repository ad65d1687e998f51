"""Input ranges of the block linears, for ComfyUI fp8's ``input_scale`` (quant.py).

ComfyUI's fast fp8 layer quantizes its input with a fixed per-tensor scale, so the converter
must know how large each linear's input gets. `measure_input_ranges` makes one batched denoiser
call (CFG rows included) over every (prompt, masked fraction) item, image codes drawn at random
with a fixed generator, and records `max |input|` per block linear with forward hooks.
Nothing is loaded whole: on a meta model the embedding, norms and the head's codebook rows are
read, and each block linear reads its weight from the memory-mapped shards right before it runs
and drops it right after, so the 8B model calibrates in a few GB of RAM.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .denoise.denoiser import DiMOODenoiser
from .denoise.prompt import ImageLayout, build_prompt_batch
from .model.config import DiMOOIds
from .model.transformer import LLaDAModel
from .weights.files import (
    get_tensor,
    open_shard,
    read_config,
    read_json,
    shard_files,
)
from .weights.fp8 import BLOCK_LINEARS
from .weights.tokenizer import load_tokenizer
from .weights.vqfiles import vq_folder

__all__ = ["DEFAULT_PROMPTS", "FRACTIONS", "range_prompts", "record_input_amax",
           "measure_input_ranges", "block_linears"]

DEFAULT_PROMPTS = (
    "A photograph of a red fox sitting in a snowy forest at dawn.",
    "A watercolor painting of a lighthouse on a rocky coast.",
    "Close-up portrait of an elderly man with a white beard, studio lighting.",
    "A bowl of ramen with an egg and green onions, seen from above.",
    "A futuristic city skyline at night with neon signs and rain.",
    "Two cats playing with a ball of yarn on a wooden floor.",
    "An isometric illustration of a cozy bedroom full of plants.",
    "A vintage poster with the word HELLO in bold letters.",
)
FRACTIONS = (1.0, 0.5, 0.1)  # masked share of the image codes per calibration item


def range_prompts(path: str | None) -> list[str]:
    """Prompts from a text file (one per line, blank lines skipped), or DEFAULT_PROMPTS."""
    if path is None:
        return list(DEFAULT_PROMPTS)
    prompts = [ln.strip() for ln in Path(path).read_text(encoding="utf-8").splitlines()]
    prompts = [p for p in prompts if p]
    if not prompts:
        raise ValueError(f"{path} holds no prompts (one per line)")
    return prompts


def block_linears(model: LLaDAModel) -> dict[str, nn.Module]:
    """{official layer name: module} of the seven linears of every block."""
    out = {}
    for i, block in enumerate(model.model.transformer.blocks):
        for attr in BLOCK_LINEARS:
            out[f"model.transformer.blocks.{i}.{attr}"] = getattr(block, attr)
    return out


@contextmanager
def record_input_amax(model: LLaDAModel) -> Iterator[dict[str, float]]:
    """Yield a dict that fills with ``max |input|`` of every block linear while it runs."""
    amax: dict[str, float] = {}
    handles = []
    for name, module in block_linears(model).items():
        def hook(_m: nn.Module, args: tuple, _out: Any, name: str = name) -> None:
            value = float(args[0].detach().abs().amax())
            amax[name] = max(amax.get(name, 0.0), value)

        handles.append(module.register_forward_hook(hook))
    try:
        yield amax
    finally:
        for h in handles:
            h.remove()


class _LazyWeights:
    """Reads block linear weights on use (pre-hook) and drops them after (hook)."""

    def __init__(self, folder: Path, model: LLaDAModel, device: torch.device,
                 dtype: torch.dtype) -> None:
        self.where: dict[str, Path] = {}
        for shard in shard_files(folder):
            with open_shard(shard) as h:
                self.where.update({k: shard for k in list(h.keys())})
        self.device, self.dtype = device, dtype
        lazy = set(block_linears(model).values())
        for name, module in model.named_modules():
            if module in lazy:
                module.register_forward_pre_hook(lambda m, a, n=name: self._load(m, n))
                module.register_forward_hook(lambda m, a, o: self._drop(m))
            elif name and not list(module.children()) and name != "model.transformer.ff_out":
                for pname, _ in list(module.named_parameters(recurse=False)):
                    key = f"{name}.{pname}"
                    setattr(module, pname, nn.Parameter(self.read(key), requires_grad=False))

    def read(self, key: str, rows: slice | None = None) -> torch.Tensor:
        shard = self.where[key]
        with open_shard(shard) as h:
            t = h.get_slice(key)[rows] if rows is not None else get_tensor(h, shard, key)
        return t.to(self.device, self.dtype)

    def _load(self, module: nn.Module, name: str) -> None:
        module.weight = nn.Parameter(self.read(name + ".weight"), requires_grad=False)

    @staticmethod
    def _drop(module: nn.Module) -> None:
        module.weight = nn.Parameter(torch.empty(module.weight.shape, device="meta"),
                                     requires_grad=False)


def range_items(ids: DiMOOIds, n_codes: int, prompts: Sequence[str], seed: int
           ) -> tuple[list[str], torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    items, tokens, masked = [], [], []
    for frac in FRACTIONS:
        for p in prompts:
            items.append(p)
            tokens.append(torch.randint(0, ids.codebook_size, (n_codes,), generator=g))
            masked.append(torch.rand(n_codes, generator=g) < frac)
    return items, torch.stack(tokens), torch.stack(masked)


def measure_input_ranges(source: str | Path, prompts: Sequence[str], size: int | None = None,
                     device: str | torch.device = "cpu", seed: int = 0) -> dict[str, float]:
    """{layer: max |input|} over one batched denoiser call (module docstring); ``size`` None =
    min(256, the checkpoint's default image size). Computes in float32 (bfloat16 on CUDA)."""
    folder, device = Path(source).expanduser(), torch.device(device)
    config, ids, raw = read_config(folder)
    tokenizer = load_tokenizer(folder, ids)
    vq_channels = read_json(vq_folder(folder) / "config.json", "the VQ-VAE config").get(
        "block_out_channels", [0])
    factor = 2 ** (len(vq_channels) - 1)
    size = size or min(256, int(raw.get("default_image_size", 1024)))
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    with torch.device("meta"):
        model = LLaDAModel(config, init_std=None)
    lazy = _LazyWeights(folder, model, device, dtype)
    head = model.model.transformer.wte if config.weight_tying else model.model.transformer.ff_out
    key = ("model.transformer.wte.weight" if config.weight_tying
           else "model.transformer.ff_out.weight")
    head.weight_rows = lambda rows, dev, dt: lazy.read(key, rows).to(dev, dt)  # type: ignore
    model.device = device

    def encode(text: str) -> list[int]:
        return list(tokenizer.encode(text).ids)

    if size % factor:
        raise ValueError(f"calibration size {size} is not a multiple of the VQ factor {factor}")
    layout = ImageLayout(size // factor, size // factor)
    items, tokens, masked = range_items(ids, layout.n_codes, prompts, seed)
    cfg = float(raw.get("default_cfg", 4.0))
    batch = build_prompt_batch(encode, ids, items, None, layout, with_uncond=cfg > 0)
    denoise = DiMOODenoiser(model.eval(), batch, ids, cfg)
    with torch.no_grad(), record_input_amax(model) as amax:
        denoise(tokens, masked)
    return amax
