"""The models the GPU check runs, none of them needing the VQ-VAE (the GPU machine has no
diffusers, so no VQ can be built there):

* ``model_only(folder)``: an official folder's transformer and tokenizer, loaded with the
  loader's own pieces (config.json, tokenizer, safetensors shards) and no VQ; its VQ factor is
  read from ``vqvae/config.json`` as the loader reads it.
* ``CodesPipeline``: a ``DiMOOPipeline`` whose VQ encoder is a known code -> colour palette:
  ``palette_image(codes)`` draws every token as a flat patch of its code's colour and
  ``encode_image`` gives those codes back exactly (nearest palette colour of each patch mean).
  Painting and editing then run through the pipeline's own path (``prepare_paint`` /
  ``prepare_edit`` -> job -> ``run``) with known codes, on any device, at token level
  (``decode=False``).
* ``shaped_pipeline(model, ...)``: a pipeline around an in-memory model (the 8B-shaped model
  with random weights), with ``WordTokenizer``, a stand-in that gives DiMOO's template tokens
  their ids and every word one id.
"""

from __future__ import annotations

import copy
import math
import re
import zlib
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from ladr_core.dimoo import DiMOOPipeline, check_image
from ladr_core.dimoo.model.config import DiMOOIds, LLaDAConfig
from ladr_core.dimoo.model.transformer import LLaDAModel
from ladr_core.dimoo.weights.checkpoint import load_transformer
from ladr_core.dimoo.weights.files import LoadedCheckpoint, read_config, read_json
from ladr_core.dimoo.weights.tokenizer import load_tokenizer

__all__ = ["IDS_8B", "SHAPE_8B", "SHAPE_TINY", "TINY_IDS", "CodesPipeline", "WordTokenizer",
           "model_only", "palette", "palette_image", "random_model", "shaped_pipeline",
           "to_device"]

#: LLaDA-8B's shape (8.08 B parameters), the model the pack runs
SHAPE_8B = dict(d_model=4096, n_heads=32, n_layers=32, mlp_hidden_size=12288, vocab_size=134656,
                embedding_size=134656, max_sequence_length=8192, rope_theta=500000.0)
#: its special ids as the loader derives them from a config.json of that shape without id keys
#: (the official offset 126356: its 8192 codes fit the 134656-wide head, 108 padding rows above)
IDS_8B = DiMOOIds.from_config_dict({}, width=SHAPE_8B["embedding_size"])
#: the smoke run's stand-in for it
SHAPE_TINY = dict(d_model=64, n_heads=4, n_layers=2, mlp_hidden_size=128, vocab_size=80,
                  embedding_size=80, max_sequence_length=512, rope_theta=500000.0)
TINY_IDS = DiMOOIds(mask=2, newline=3, image_offset=16, boa=4, eoa=5, boi=6, eoi=7,
                    uncondition=8, codebook_size=64)
TEMPLATE = ("<system>", "</system>", "<user>", "</user>")


def palette(k: int) -> torch.Tensor:
    """K distinct colours float [K, 3] in [0, 1]: code k's digits in base m = ceil(K^(1/3))."""
    m = max(2, math.ceil(k ** (1 / 3) - 1e-9))
    while m ** 3 < k:
        m += 1
    codes = torch.arange(k)
    digits = torch.stack([codes % m, codes // m % m, codes // (m * m) % m], dim=-1)
    return digits.float() / (m - 1)


def palette_image(codes: torch.Tensor, grid: tuple[int, int], factor: int,
                  k: int) -> torch.Tensor:
    """Codes [B, h*w] -> IMAGE float [B, h*f, w*f, 3]: each token a flat patch of its colour."""
    h, w = grid
    img = palette(k)[codes.cpu().long()].reshape(codes.shape[0], h, w, 3)
    return img.repeat_interleave(factor, dim=1).repeat_interleave(factor, dim=2).contiguous()


class CodesPipeline(DiMOOPipeline):
    """A DiMOOPipeline whose VQ is the palette (module docstring): ``encode_image`` is exact for
    images made by ``palette_image``; ``decode`` draws the palette. Everything else is the
    pipeline's own code."""

    def encode_image(self, image: torch.Tensor) -> torch.Tensor:
        image = check_image(image, self.vq_factor, "image")
        f, (b, hh, ww, _) = self.vq_factor, image.shape
        patches = image.reshape(b, hh // f, f, ww // f, f, 3).mean(dim=(2, 4)).reshape(b, -1, 3)
        colours = palette(self.ids.codebook_size)
        return torch.cdist(patches, colours[None].expand(b, -1, -1)).argmin(dim=-1)

    def decode(self, tokens: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
        return palette_image(tokens, grid, self.vq_factor, self.ids.codebook_size)

    def with_transformer(self, model: LLaDAModel) -> CodesPipeline:
        """The same pipeline (tokenizer, ids, sizes) around another transformer, eager."""
        view = copy.copy(self)
        view.transformer, view.compiled, view._compiled_views = model, None, {}
        return view


def model_only(folder: Path, dtype: torch.dtype = torch.float32) -> CodesPipeline:
    """An official folder's transformer (on the CPU, ``dtype``) and tokenizer; no VQ."""
    config, ids, raw = read_config(folder)
    tokenizer = load_tokenizer(folder, ids)
    vq_config = read_json(folder / "vqvae" / "config.json", "the VQ-VAE config")
    factor = 2 ** (len(vq_config["block_out_channels"]) - 1)
    model = load_transformer(folder, config, dtype, torch.device("cpu"))
    return CodesPipeline(LoadedCheckpoint(model, config, ids, tokenizer, None, factor, raw,
                                          folder))


def to_device(model: LLaDAModel, device: torch.device) -> LLaDAModel:
    """A copy of ``model`` on ``device`` (the same stored values, byte for byte)."""
    out = copy.deepcopy(model).to(device)
    out.device = device if getattr(model, "device", None) is not None else None
    return out


class WordTokenizer:
    """Stand-in tokenizer: DiMOO's template tokens to their ids, each word or punctuation mark
    to one id of ``text_ids`` (a stable hash), so a prompt has about as many tokens as words.
    ``encode(text).ids`` as ``tokenizers.Tokenizer``."""

    PATTERN = re.compile(r"<[^<>\s]+>|\w+|[^\w\s]")

    def __init__(self, specials: dict[str, int], text_ids: Sequence[int]) -> None:
        self.specials, self.text_ids = dict(specials), list(text_ids)

    def encode(self, text: str, add_special_tokens: bool = False) -> Any:
        ids = [self.specials[w] if w in self.specials
               else self.text_ids[zlib.crc32(w.encode()) % len(self.text_ids)]
               for w in self.PATTERN.findall(text)]
        return SimpleNamespace(ids=ids)


def word_tokenizer(ids: DiMOOIds, vocab: int) -> WordTokenizer:
    """The template's four tokens take ids past the largest special id (the 8B ids) or the
    first free ones (the tiny ids); words take the other ids below the image codes."""
    taken = {ids.mask, ids.newline, ids.boa, ids.eoa, ids.boi, ids.eoi, ids.uncondition}
    free = [i for i in range(ids.image_offset) if i not in taken]
    template = free[-len(TEMPLATE):] if vocab > 1000 else free[:len(TEMPLATE)]
    words = [i for i in free if i not in template]
    if vocab > 1000:
        words = words[1000:120000]
    specials = dict(zip(TEMPLATE, template, strict=True)) | {"<uncondition>": ids.uncondition}
    return WordTokenizer(specials, words)


def random_model(config: LLaDAConfig, device: torch.device, dtype: torch.dtype,
                 seed: int = 0) -> LLaDAModel:
    """Random N(0, 0.02) weights allocated once, directly in ``dtype`` on ``device``."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device("meta"):
            model = LLaDAModel(config, init_std=None)
    finally:
        torch.set_default_dtype(previous)
    model.to_empty(device=device)
    torch.manual_seed(seed)
    model.reset_parameters(0.02)
    return model.eval().requires_grad_(False)


def shaped_pipeline(model: LLaDAModel, config: LLaDAConfig, ids: DiMOOIds,
                    default_size: int, factor: int = 16) -> CodesPipeline:
    """A pipeline around an in-memory model (no folder, no VQ) with ``WordTokenizer``."""
    raw = {"default_image_size": default_size}
    tok = word_tokenizer(ids, config.embedding_size or config.vocab_size)
    return CodesPipeline(LoadedCheckpoint(model, config, ids, tok, None, factor, raw, None))
