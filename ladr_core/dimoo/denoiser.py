"""The ``denoise`` callable handed to the core sampler (docs/ARCHITECTURE.md section 1).

``denoise(tokens LongTensor[B, N], masked BoolTensor[B, N]) -> logits FloatTensor[B, N, K]``:

1. writes ``code + image_offset`` (or the mask id) into the image code slots of every prompt
   row, skipping newline slots (official ``generate_image`` writes into ``x`` the same way);
2. runs cond and uncond rows in ONE forward ``[2B, L]`` (left padding + key-padding mask +
   padding-free position ids, so each row equals its unpadded official sequence; the official
   code runs two passes);
3. projects only the image code slots onto the codebook rows ``[offset, offset + K)`` of the
   output layer (the official code computes the whole vocabulary at every position, then
   slices), and applies CFG ``(1 + s) * cond - s * uncond`` in float32; ``s == 0`` runs the cond
   rows only;
4. with an ML-Cache config, refresh / cached steps follow cache.MLCacheConfig (one step per call).

Stats: ``nfe`` (calls), ``token_forwards`` (real tokens pushed through the transformer),
``token_forwards_full`` (what full passes would have pushed for the same calls).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .cache import BranchCache, MLCacheConfig
from .config import DiMOOIds
from .model import LLaDAModel, default_position_ids
from .prompt import PromptBatch

__all__ = ["DenoiserStats", "DiMOODenoiser"]


@dataclass
class DenoiserStats:
    nfe: int = 0
    token_forwards: int = 0
    token_forwards_full: int = 0
    refresh_steps: int = 0
    cached_steps: int = 0


def valid_cfg(value: object) -> bool:
    """A guidance scale: a real (not bool) finite number >= 0 (0 disables guidance)."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value >= 0)


class DiMOODenoiser:
    """Prompt rows + batched CFG + optional ML-Cache around a ``LLaDAModel``."""

    def __init__(self, model: LLaDAModel, batch: PromptBatch, ids: DiMOOIds, cfg: float,
                 cache: MLCacheConfig | None = None, steps: int | None = None) -> None:
        if not valid_cfg(cfg):
            raise ValueError(f"cfg must be a finite number >= 0 (got {cfg!r}); 0 disables guidance")
        if cache is not None and not isinstance(cache, MLCacheConfig):
            raise ValueError(f"cache must be an MLCacheConfig or None (got {type(cache).__name__})")
        if cache is not None and (not isinstance(steps, int) or steps < 1):
            raise ValueError("steps (the sampler's planned step count) is required with an ML-Cache")
        rows = batch.input_ids.shape[0]
        if rows != batch.batch * (2 if cfg > 0 else 1):
            raise ValueError(f"prompt batch has {rows} rows; cfg={cfg} needs "
                             f"{batch.batch * (2 if cfg > 0 else 1)} (build it with_uncond={cfg > 0})")
        self.model, self.ids, self.cfg = model, ids, float(cfg)
        self.cache_config, self.steps = cache, steps
        self.device = model.output_weight().device
        # ONE host -> device copy for the prompt rows, their mask and the code slots (on an
        # accelerator every copy from pageable host memory waits for the host).
        size = batch.input_ids.numel()
        packed = torch.cat([batch.input_ids.flatten(), batch.attention_mask.long().flatten(),
                            batch.code_index.long()]).to(self.device)
        self.input_ids = packed[:size].view(batch.input_ids.shape)
        self.attention_mask = packed[size:2 * size].view(batch.attention_mask.shape)
        self.position_ids = default_position_ids(self.attention_mask, rows, self.input_ids.shape[1],
                                                 self.device)
        self.code_index = packed[2 * size:]
        self.batch, self.layout = batch.batch, batch.layout
        self.real_tokens = int(batch.attention_mask.sum())
        self.codebook = slice(ids.image_offset, ids.image_offset + ids.codebook_size)
        self.stats = DenoiserStats()
        self.branches = BranchCache(cache) if cache is not None else None
        # a padded key mask is only needed when rows have different lengths
        # (decided on the host copy: no device sync)
        self.key_mask = None if bool(batch.attention_mask.all()) else self.attention_mask

    # ---- sequence assembly ---------------------------------------------------------------
    def sequences(self, tokens: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
        """[R, L] rows with the image code slots filled (uncond rows reuse the item's tokens)."""
        b, n = tokens.shape
        if (b, n) != (self.batch, self.layout.n_codes):
            raise ValueError(f"tokens shape {(b, n)} != (batch {self.batch}, codes "
                             f"{self.layout.n_codes}) of this denoiser")
        codes = torch.where(masked.to(self.device), self.ids.mask,
                            tokens.to(self.device) + self.ids.image_offset)
        rows = self.input_ids.shape[0] // b
        seq = self.input_ids.clone()
        seq[:, self.code_index] = codes.repeat(rows, 1)
        return seq

    def _project(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.model.project(hidden, rows=self.codebook).float()

    def _full(self, seq: torch.Tensor, keep_kv: bool) -> torch.Tensor:
        hidden, kv = self.model.hidden_states(seq, self.key_mask, self.position_ids, return_kv=keep_kv)
        logits = self._project(hidden[:, self.code_index])
        if keep_kv and self.branches is not None:
            self.branches.store(kv, logits)  # type: ignore[arg-type]
        self.stats.token_forwards += self.real_tokens
        return logits

    def _cached(self, seq: torch.Tensor) -> torch.Tensor:
        assert self.branches is not None and self.branches.kv is not None
        index = self.branches.next_index
        assert index is not None
        hidden = self.model.hidden_states_partial(seq, self.code_index[index], self.branches.kv,
                                                  self.key_mask, self.position_ids)
        self.stats.token_forwards += index.numel()
        return self.branches.update(index, self._project(hidden))

    def __call__(self, tokens: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
        """tokens/masked [B, N] -> guided codebook logits [B, N, K] (float32)."""
        with torch.no_grad():
            seq = self.sequences(tokens, masked)
            step = self.stats.nfe
            if self.branches is None:
                logits = self._full(seq, keep_kv=False)
            elif (self.cache_config.is_refresh(step, self.steps)  # type: ignore[union-attr]
                  or not self.branches.ready):
                logits = self._full(seq, keep_kv=True)
                self.stats.refresh_steps += 1
            else:
                logits = self._cached(seq)
                self.stats.cached_steps += 1
            if self.branches is not None:
                self.branches.plan_next(logits)
            self.stats.nfe += 1
            self.stats.token_forwards_full += self.real_tokens
            if self.cfg == 0:
                return logits.clone() if self.branches is not None else logits
            cond, uncond = logits[: self.batch], logits[self.batch:]
            return (1.0 + self.cfg) * cond - self.cfg * uncond
