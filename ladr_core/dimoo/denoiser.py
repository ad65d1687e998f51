"""The ``denoise`` callable handed to the core sampler (docs/ARCHITECTURE.md section 1).

``denoise(tokens LongTensor[B, N], masked BoolTensor[B, N]) -> logits FloatTensor[B, N, K]``:

1. writes ``code + image_offset`` (or the mask id) into the image code slots of every prompt
   row, skipping newline slots (official ``generate_image`` writes into ``x`` the same way);
2. runs cond and uncond rows in ONE forward with no padding (packed.py: the rows' real tokens
   back to back through every linear layer, attention per row on its true length, positions
   restarting per row), so each row equals its unpadded official sequence; the official code
   runs two passes;
3. projects only the image code slots onto the codebook rows ``[offset, offset + K)`` of the
   output layer (the official code computes the whole vocabulary at every position, then
   slices), and applies CFG ``(1 + s) * cond - s * uncond`` in float32; ``s == 0`` runs the cond
   rows only;
4. with an ML-Cache config, refresh / cached calls follow cache.CacheSchedule (by progress:
   the masked count the previous call saw, read without a host sync), K/V kept packed and
   refreshed in place (cache.BranchCache).

Stats: ``nfe`` (calls), ``token_forwards`` (real tokens pushed through the transformer),
``token_forwards_full`` (what full passes would have pushed for the same calls).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from .cache import BranchCache, CacheSchedule, MLCacheConfig
from .compile import CompiledPasses
from .config import DiMOOIds
from .hostlag import HostLag
from .model import LLaDAModel
from .packed import PackedRows, full_pass, partial_pass
from .prompt import PromptBatch

__all__ = ["DenoiserStats", "DiMOODenoiser"]


@dataclass
class DenoiserStats:
    nfe: int = 0
    token_forwards: int = 0
    token_forwards_full: int = 0
    refresh_steps: int = 0
    cached_steps: int = 0
    refresh_at: list[int] = field(default_factory=list)  # call indices (0-based) of refreshes
    compile_seconds: float = 0.0  # first calls of new shapes under a compiled pipeline
    host_waits: int = 0  # ML-Cache count reads that had to wait for the device (hostlag.py)


def valid_cfg(value: object) -> bool:
    """A guidance scale: a real (not bool) finite number >= 0 (0 disables guidance)."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value >= 0)


class DiMOODenoiser:
    """Prompt rows + batched CFG + optional ML-Cache around a ``LLaDAModel``."""

    def __init__(self, model: LLaDAModel, batch: PromptBatch, ids: DiMOOIds, cfg: float,
                 cache: MLCacheConfig | None = None, steps: int | None = None,
                 n_generate: int | None = None) -> None:
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
        self.device = model.compute_device()
        self.batch, self.layout = batch.batch, batch.layout
        self._pack(batch)
        self.codebook = slice(ids.image_offset, ids.image_offset + ids.codebook_size)
        self.stats = DenoiserStats()
        self.branches = BranchCache(cache) if cache is not None else None
        # the ML-Cache's progress follows the count the sampler generates (fewer than N codes
        # when some are known: inpainting)
        self.schedule = (CacheSchedule(cache, steps,  # type: ignore[arg-type]
                                       n_generate or self.layout.n_codes)
                         if cache is not None else None)
        self.lag = HostLag()  # the ML-Cache's counts, read one call later (hostlag.py)
        self.forward_hook: Any = None  # compile.CompiledPasses (pipe.compile); None = eager

    def _pack(self, batch: PromptBatch) -> None:
        """Packed ids [T], the row layout, and each row's code slots as packed positions [R, N];
        also the padded rows `input_ids` / `attention_mask` [R, L] (for inspection and the
        padded benchmark path). Everything is laid out on the host and reaches the device in
        ONE copy: on an accelerator every copy from pageable host memory waits for the host, so on
        CUDA it comes from pinned memory, asynchronously."""
        mask = batch.attention_mask.bool()
        rows = PackedRows.from_lengths(mask.sum(dim=1).tolist())
        pad = batch.input_ids.shape[1] - mask.sum(dim=1)  # left padding per row
        code_pos = rows.starts[:, None] - pad[:, None] + batch.code_index[None]
        parts = [batch.input_ids, batch.attention_mask, batch.input_ids[mask], code_pos,
                 rows.starts, rows.positions]
        flat = torch.cat([t.reshape(-1).long() for t in parts])
        if self.device.type == "cuda":  # from pinned memory the copy need not wait for the host
            flat = flat.pin_memory().to(self.device, non_blocking=True)
        else:
            flat = flat.to(self.device)
        (self.input_ids, self.attention_mask, self.packed_ids, self.code_pos, starts,
         positions) = (v.view(t.shape) for v, t in
                       zip(flat.split([t.numel() for t in parts]), parts, strict=True))
        self.rows = replace(rows, starts=starts, positions=positions)
        self.real_tokens = self.rows.total

    # ---- sequence assembly ---------------------------------------------------------------
    def sequences(self, tokens: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
        """Packed ids [T] with the image code slots of every row filled (uncond rows reuse the
        item's tokens)."""
        b, n = tokens.shape
        if (b, n) != (self.batch, self.layout.n_codes):
            raise ValueError(f"tokens shape {(b, n)} != (batch {self.batch}, codes "
                             f"{self.layout.n_codes}) of this denoiser")
        codes = torch.where(masked.to(self.device), self.ids.mask,
                            tokens.to(self.device) + self.ids.image_offset)
        rows = self.code_pos.shape[0] // b
        seq = self.packed_ids.clone()
        seq[self.code_pos.reshape(-1)] = codes.repeat(rows, 1).reshape(-1)
        return seq

    def _project(self, hidden: torch.Tensor) -> torch.Tensor:
        """Codebook logits in the model's dtype (the cache keeps them so: ``.float()`` of them
        is what the sampler gets, exactly as without a cache)."""
        return self.model.project(hidden, rows=self.codebook)

    def _run(self, which: str, *args: Any) -> Any:
        """packed.full_pass / partial_pass, or their compiled versions (timing first calls)."""
        hook = self.forward_hook
        if hook is None:
            return (full_pass if which == "full" else partial_pass)(self.model, *args)
        before = hook.compile_seconds
        out = getattr(hook, which)(self.model, *args)
        self.stats.compile_seconds += hook.compile_seconds - before
        return out

    def _full(self, seq: torch.Tensor, keep_kv: bool) -> torch.Tensor:
        cache = self.branches
        kv_out = cache.kv if keep_kv and cache is not None else None
        hidden, kv = self._run("full", seq, self.rows, kv_out, keep_kv)
        logits = self._project(hidden[self.code_pos])
        self.stats.token_forwards += self.real_tokens
        if keep_kv and cache is not None:
            cache.store(kv, logits, seq[self.code_pos])  # type: ignore[arg-type]
            return cache.logits.float()  # type: ignore[union-attr]
        return logits.float()

    def _cached(self, seq: torch.Tensor, codes: torch.Tensor, need: torch.Tensor | None,
                need_max: int) -> tuple[torch.Tensor, torch.Tensor]:
        """A cached pass: logits [R, N, K] (float32) and the recomputed code slots [R, M]."""
        assert self.branches is not None and self.branches.kv is not None
        # compiled passes: cached-pass sizes in 8 buckets of N (one graph each), eager: exact
        compiled = isinstance(self.forward_hook, CompiledPasses)
        bucket = -(-self.layout.n_codes // 8) if compiled else 1
        index = self.branches.pick(need, need_max, bucket)
        hidden = self._run("partial", seq, self.rows, self.code_pos.gather(1, index),
                           self.branches.kv)
        self.stats.token_forwards += index.numel()
        fresh = self._project(hidden).view(*index.shape, -1)
        return self.branches.update(index, fresh, codes).float(), index

    def __call__(self, tokens: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
        """tokens/masked [B, N] -> guided codebook logits [B, N, K] (float32)."""
        with torch.no_grad():
            seq = self.sequences(tokens, masked)
            if self.branches is None or self.schedule is None:
                logits = self._full(seq, keep_kv=False)
            else:
                logits = self._cache_step(seq, masked)
            if self.branches is not None:
                self.branches.plan_next(logits)
            self.stats.nfe += 1
            self.stats.token_forwards_full += self.real_tokens
            if self.cfg == 0:  # never hand out the cache's own buffer (float32 models)
                held = self.branches.logits if self.branches is not None else None
                return logits.clone() if logits is held else logits
            cond, uncond = logits[: self.batch], logits[self.batch:]
            return (1.0 + self.cfg) * cond - self.cfg * uncond

    def _cache_step(self, seq: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
        """A refresh (full pass, K/V kept) or a cached pass, as the schedule decides.

        No host sync: the schedule and the pass's size use the previous call's counts
        (hostlag.py), and this call posts its own for the next one. Under ``recompute_masked``
        the slots needed now are exactly those masked at the previous call (each was
        recomputed then, and the sampler only unmasks), so the previous call's largest masked
        count per item sizes this pass. A device-side check, read at the next call, refuses a
        sampler that re-masks or rewrites committed tokens instead of silently reusing stale
        logits for them.
        """
        assert self.branches is not None and self.schedule is not None
        prev = self.lag.read()  # [masked total, largest per item, slots skipped] or None
        if prev is not None and prev[2]:
            raise RuntimeError(
                "ML-Cache with recompute_masked reused stale logits: the sampler re-masked or "
                "changed tokens it had committed, which this cache does not support; run "
                "without an ML-Cache or with recompute_masked=False")
        mean = None if prev is None else prev[0] / max(self.batch, 1)
        skipped = torch.zeros((), dtype=torch.long, device=self.device)
        if self.schedule.refresh(mean, self.branches.ready):
            logits = self._full(seq, keep_kv=True)
            self.stats.refresh_steps += 1
            self.stats.refresh_at.append(self.stats.nfe)
        else:  # only a cached pass needs the slots that changed since the cached K/V
            codes = seq[self.code_pos]
            need = self.branches.needed(codes, self.ids.mask)
            logits, index = self._cached(seq, codes, need, 0 if prev is None else prev[1])
            if need is not None and self.branches.config.recompute_masked:
                skipped = (need.sum(dim=1) > index.shape[1]).any().long()
            self.stats.cached_steps += 1
        per_item = masked.to(self.device).sum(dim=1)
        self.lag.post(torch.stack([per_item.sum(), per_item.max(), skipped]))
        self.stats.host_waits = self.lag.waits
        return logits
