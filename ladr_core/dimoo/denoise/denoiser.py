"""The ``denoise`` callable handed to the core sampler (ladr_core/sampling.py).

``denoise(tokens LongTensor[A, N], masked BoolTensor[A, N], items=None) -> logits [A, N, K]``
(float32) for the items ``items`` (None: all B in order; the sampler sends only the items
still running). Per call:

1. ``code + image_offset`` (or the mask id) goes into every prompt row's image code slots,
   skipping newline slots, as the official ``generate_image`` writes into ``x``;
2. cond and uncond rows run in ONE packed forward without padding (packed.py), each row
   equal to its unpadded official sequence (the official code runs two passes);
3. only the image code slots are projected, onto the codebook rows ``[offset, offset + K)``
   (the official code projects the whole vocabulary, then slices), and CFG
   ``(1 + s) * cond - s * uncond`` is applied in float32 (``s == 0``: cond rows only);
4. with an ML-Cache each item follows its own refresh schedule (itemcache.py, cache.py).

Stats: ``nfe`` (calls), ``token_forwards`` (real tokens through the transformer),
``token_forwards_full`` (what full passes would have pushed), ``item_token_forwards`` (per
item, to set a batch's cost against its items' single runs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from ...devices import index
from ..model.compile import CompiledPasses
from ..model.config import DiMOOIds
from ..model.packed import full_pass, partial_pass
from ..model.transformer import LLaDAModel
from .cache import MLCacheConfig
from .itemcache import ItemCaches
from .layout import Pack, RowTable
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
    item_token_forwards: list[int] = field(default_factory=list)  # per item of the batch


def valid_cfg(value: object) -> bool:
    """A guidance scale: a real (not bool) finite number >= 0 (0 disables guidance)."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value >= 0)


class DiMOODenoiser:
    """Prompt rows + batched CFG + optional ML-Cache around a ``LLaDAModel``.

    n_generate: the count each item's sampler generates (N, or fewer with known tokens: one
    int for every item or one per item); an item's ML-Cache schedule runs over it."""

    def __init__(self, model: LLaDAModel, batch: PromptBatch, ids: DiMOOIds, cfg: float,
                 cache: MLCacheConfig | None = None, steps: int | None = None,
                 n_generate: int | list[int] | None = None, image_cfg: float | None = None
                 ) -> None:
        if not valid_cfg(cfg):
            raise ValueError(f"cfg must be a finite number >= 0 (got {cfg!r}); 0 disables guidance")
        if cache is not None and not isinstance(cache, MLCacheConfig):
            raise ValueError(f"cache must be an MLCacheConfig or None (got {type(cache).__name__})")
        if cache is not None and (not isinstance(steps, int) or steps < 1):
            raise ValueError("steps (the sampler's planned step count) is required with an ML-Cache")
        if image_cfg is not None and not valid_cfg(image_cfg):
            raise ValueError(f"image_cfg must be a finite number >= 0 (got {image_cfg!r}); 0 "
                             "disables image guidance")
        rows = batch.input_ids.shape[0]
        if image_cfg is None:
            branches = 2 if cfg > 0 else 1
        else:  # editing (editing.py): cond, text-uncond and image-uncond rows
            branches = 3 if (cfg > 0 or image_cfg > 0) else 1
        if rows != batch.batch * branches:
            raise ValueError(f"prompt batch has {rows} rows; cfg={cfg} needs "
                             f"{batch.batch * branches} (build it with_uncond={cfg > 0})")
        self.model, self.ids, self.cfg = model, ids, float(cfg)
        self.image_cfg = None if image_cfg is None else float(image_cfg)
        self.cache_config, self.steps = cache, steps
        self.device = model.compute_device()
        self.batch, self.layout = batch.batch, batch.layout
        self.table = RowTable(batch, branches)
        self._packs: dict[tuple[int, ...], Pack] = {}
        self.all_items = tuple(range(self.batch))
        full = self.pack(self.all_items)
        # the whole padded batch, for inspection only: host tensors (the passes read the
        # packed ids, layout.py), so building a denoiser copies nothing to the device for them
        self.input_ids, self.attention_mask = batch.input_ids, batch.attention_mask
        self.rows, self.code_pos, self.real_tokens = full.rows, full.code_pos, full.real_tokens
        self.codebook = slice(ids.image_offset, ids.image_offset + ids.codebook_size)
        self.stats = DenoiserStats(item_token_forwards=[0] * self.batch)
        counts = n_generate if isinstance(n_generate, list) else \
            [n_generate or self.layout.n_codes] * self.batch
        self.caches = ItemCaches(cache, steps, counts) if cache is not None else None  # type: ignore[arg-type]
        self.forward_hook: Any = None  # compile.CompiledPasses (pipe.compile); None = eager

    def pack(self, items: tuple[int, ...]) -> Pack:
        """The packed rows of `items` (layout.py), kept for the few sets a run meets."""
        got = self._packs.get(items)
        if got is None:
            if len(self._packs) >= 4:  # a rolling batch meets each set once or twice
                self._packs.pop(next(iter(self._packs)))
            got = self._packs[items] = self.table.pack(items, self.device)
        return got

    # ---- sequence assembly ---------------------------------------------------------------
    def _codes(self, tokens: torch.Tensor, masked: torch.Tensor, items: tuple[int, ...]
               ) -> torch.Tensor:
        """[A, N] ids of the items' code slots: ``code + image_offset``, or the mask id."""
        a, n = tokens.shape
        if (a, n) != (len(items), self.layout.n_codes):
            raise ValueError(f"tokens shape {(a, n)} != (items {len(items)}, codes "
                             f"{self.layout.n_codes}) of this denoiser")
        return torch.where(masked.to(self.device), self.ids.mask,
                           tokens.to(self.device) + self.ids.image_offset)

    def _sequence(self, pack: Pack, codes: torch.Tensor) -> torch.Tensor:
        """Packed ids [T] of `pack` with its items' code slots filled (uncond rows reuse the
        item's codes)."""
        seq = pack.ids.clone()
        seq[pack.code_pos.reshape(-1)] = codes.repeat(self.table.branches, 1).reshape(-1)
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

    def _count(self, items: tuple[int, ...] | list[int], per_item: list[int]) -> None:
        self.stats.token_forwards += sum(per_item)
        for item, count in zip(items, per_item, strict=True):
            self.stats.item_token_forwards[item] += count

    # ---- passes ----------------------------------------------------------------------------
    def _full(self, items: tuple[int, ...], codes: torch.Tensor, keep: bool) -> torch.Tensor:
        """A full pass over the items' rows: logits [R, N, K] (model dtype, pack row order);
        with `keep`, each item's K/V and logits go into its cache (written in place)."""
        pack = self.pack(items)
        seq = self._sequence(pack, codes)
        sink = self._kv_sink(pack) if keep else None
        logits = self._project(self._run("full", seq, pack.rows, sink)[pack.code_pos])
        lengths = pack.rows.lengths
        self._count(items, [sum(lengths[r] for r in self._item_rows(pack, a))
                            for a in range(len(items))])
        if keep:
            row_codes = seq[pack.code_pos]
            for a, item in enumerate(items):  # rows a, a + A, ...: a slice, no host index
                rows = slice(a, None, len(items))
                self.caches[item].store(logits[rows], row_codes[rows])  # type: ignore[index]
        return logits

    def _item_rows(self, pack: Pack, a: int) -> list[int]:
        """Rows of the a-th item of `pack`: its cond row, then its uncond row(s)."""
        return [a + b * len(pack.items) for b in range(self.table.branches)]

    def _kv_sink(self, pack: Pack) -> Any:
        """Copies each row's part of a full pass's K/V into its item's cache, layer by layer."""
        starts = [0]
        for length in pack.rows.lengths:
            starts.append(starts[-1] + length)
        layers = len(self.model.blocks)

        def sink(layer: int, k: torch.Tensor, v: torch.Tensor) -> None:
            for a, item in enumerate(pack.items):
                rows = self._item_rows(pack, a)
                lengths = tuple(pack.rows.lengths[r] for r in rows)
                kb, vb = self.caches[item].buffers(layers, lengths, k)[layer]  # type: ignore[index]
                at = 0
                for r, length in zip(rows, lengths, strict=True):
                    kb[at: at + length].copy_(k[starts[r]: starts[r] + length])
                    vb[at: at + length].copy_(v[starts[r]: starts[r] + length])
                    at += length

        return sink

    def _cached(self, items: list[int], codes: torch.Tensor, local: torch.Tensor,
                previous: dict[int, int]) -> tuple[dict[int, torch.Tensor], torch.Tensor]:
        """One cached pass over the items (each item's rows recompute their own picks):
        {item: its logits [R, N, K] (its cache's buffer)} and the stale flags [len(items)].

        codes: [len(items), N] their code ids; local: [len(items) * branches, N] each row's code
        slots inside the row (item-major)."""
        compiled = isinstance(self.forward_hook, CompiledPasses)
        bucket = -(-self.layout.n_codes // 8) if compiled else 1  # compiled: 8 pass sizes
        rb = self.table.branches
        ids, positions, counts, kv, picks = [], [], [], [], []
        for a, item in enumerate(items):
            cache = self.caches[item]  # type: ignore[index]
            row_codes = codes[a].expand(rb, -1)
            need = cache.needed(row_codes, self.ids.mask)
            index = cache.pick(need, previous.get(item, 0), bucket)
            ids.append(row_codes.gather(1, index).reshape(-1))
            positions.append(local[a * rb: (a + 1) * rb].gather(1, index).reshape(-1))
            counts += [index.shape[1]] * rb
            kv += cache.row_kv()
            picks.append((item, cache, row_codes, need, index))
        hidden = self._run("partial", torch.cat(ids), torch.cat(positions), counts, kv)
        fresh = self._project(hidden).split([p[4].numel() for p in picks])
        self._count(items, [p[4].numel() for p in picks])
        out, skipped = {}, []
        for (item, cache, row_codes, need, index), part in zip(picks, fresh, strict=True):
            out[item] = cache.update(index, part.view(*index.shape, -1), row_codes)
            stale = need is not None and cache.config.recompute_masked
            skipped.append((need.sum(dim=1) > index.shape[1]).any() if stale else
                           torch.zeros((), dtype=torch.bool, device=self.device))
        return out, torch.stack(skipped).long()

    def _cache_call(self, items: tuple[int, ...], codes: torch.Tensor, masked: torch.Tensor
                    ) -> torch.Tensor:
        """Refreshes and cached passes as each item's schedule decides: logits [R, N, K] in
        the order of `pack(items)` (float32). No host sync: the schedules read the previous
        call's counts (itemcache.py), and this call posts its own."""
        caches = self.caches
        assert caches is not None
        caches.release_others(items)  # finished items' caches go before new ones are made
        previous = caches.previous()
        refresh, cached = caches.plan(items, previous)
        where = {item: a for a, item in enumerate(items)}
        parts: dict[int, torch.Tensor] = {}
        skipped = torch.zeros(len(items), dtype=torch.long, device=self.device)
        if refresh:
            sub = codes if len(refresh) == len(items) else \
                codes.index_select(0, index([where[i] for i in refresh], self.device))
            self._full(tuple(refresh), sub, keep=True)
            parts.update({item: caches[item].logits for item in refresh})
            self.stats.refresh_steps += 1
            self.stats.refresh_at.append(self.stats.nfe)
        if cached:
            pack = self.pack(items)
            rb = self.table.branches
            sel = [where[i] for i in cached]
            local = pack.code_local.view(rb, len(items), -1).transpose(0, 1)
            idx = index(sel, self.device)
            got, stale = self._cached(cached, codes.index_select(0, idx),
                                      local.index_select(0, idx).reshape(-1, local.shape[-1]),
                                      previous)
            parts.update(got)
            skipped = skipped.index_copy(0, idx, stale)
            self.stats.cached_steps += 1
        caches.post(items, masked.to(self.device), skipped)
        self.stats.host_waits = caches.waits
        logits = torch.stack([parts[item][b] for b in range(self.table.branches)
                              for item in items])  # model dtype: _guide makes the float32
        for a, item in enumerate(items):
            caches[item].plan_next(logits[a::len(items)])
        return logits

    def __call__(self, tokens: torch.Tensor, masked: torch.Tensor,
                 items: list[int] | None = None) -> torch.Tensor:
        """tokens/masked [A, N] of `items` (None: all B in order) -> guided codebook logits
        [A, N, K] (float32)."""
        chosen = self.all_items if items is None else tuple(int(i) for i in items)
        with torch.no_grad():
            codes = self._codes(tokens, masked, chosen)
            if self.caches is None:
                logits = self._full(chosen, codes, keep=False)
            else:
                logits = self._cache_call(chosen, codes, masked)
            self.stats.nfe += 1
            self.stats.token_forwards_full += self.pack(chosen).real_tokens
            return self._guide(logits, len(chosen))

    def _guide(self, logits: torch.Tensor, a: int) -> torch.Tensor:
        """Rows' logits [R * A, N, K] -> guided float32 logits [A, N, K]: the official
        ``(1 + s) * cond - s * uncond`` (editing: ``cond + s * (cond - text) + s_img * (cond -
        image)``). Each branch is upcast on its own and combined in place (no float32 copy of
        all rows), the official operations in order, so the same values bit for bit."""
        if self.table.branches == 1:
            return logits.float()
        cond = logits[:a].float()
        if self.image_cfg is not None:  # official image-to-image guidance
            text = logits[a:2 * a].float().neg_().add_(cond).mul_(self.cfg)  # s * (cond - text)
            image = logits[2 * a:].float().neg_().add_(cond).mul_(self.image_cfg)
            return cond.add_(text).add_(image)
        uncond = logits[a:].float().mul_(self.cfg)
        return cond.mul_(1.0 + self.cfg).sub_(uncond)

    def masked_logits(self, tokens: torch.Tensor, masked: torch.Tensor
                      ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One full pass over all B items, no cache: codebook logits (float32) at the masked
        slots only, per branch: (cond [M, K], uncond [M, K] or None without CFG), in the
        row-major order of ``masked.nonzero()``. Counted in the stats as a sampling call."""
        with torch.no_grad():
            items = self.all_items
            pack = self.pack(items)
            seq = self._sequence(pack, self._codes(tokens, masked, items))
            hidden = self._run("full", seq, pack.rows, None)
            m = masked.to(self.device)
            pos = pack.code_pos[m.repeat(self.table.branches, 1)]
            logits = self._project(hidden[pos]).float()
            self._count(items, [sum(pack.rows.lengths[r] for r in self._item_rows(pack, a))
                                for a in range(len(items))])
            self.stats.nfe += 1
            self.stats.token_forwards_full += pack.real_tokens
        count = int(m.sum())
        return logits[:count], (logits[count:] if self.table.branches == 2 else None)

    def item(self, index: int) -> Any:
        """The ML-Cache of item `index` (cache.BranchCache), or None without a cache."""
        return None if self.caches is None else self.caches[index]
