"""Probes for benchmarks/ml_cache_sweep.py: which reused state costs LADR its quality on nano.

Not product options: each probe patches the ML-Cache path for the duration of a ``with`` block
to answer one question that ``MLCacheConfig`` cannot express.

* ``text_fresh``: on a cached call also recompute every position that is not an image code slot
  (prompt text, special tokens, the image's newline tokens), so the only reused K/V are those of
  committed, unchanged image tokens. Token-forwards count every recomputed position once.
* ``uncond_stale``: on a cached call the uncond rows keep the logits of the last refresh at
  still-masked, unchanged slots (the cond rows get fresh ones). Their K/V are still recomputed;
  the token-forwards are counted as if they were not, so this probe's cost is a lower bound.
* ``masked_top:F`` (with ``recompute_changed=True``): on a cached call recompute the changed
  slots and only the fraction F of the still-masked slots whose cond-row max logit was highest
  at the previous call (the ones a confidence-ranked step commits next), the same slots in both
  rows; the least confident masked slots keep stale logits and K/V. The pass is sized on the
  host (a sync per call: a probe, not a product path).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from ladr_core.dimoo import cache as cache_mod
from ladr_core.dimoo import denoiser as denoiser_mod
from ladr_core.dimoo.packed import partial_pass

PROBES = ("text_fresh", "uncond_stale", "masked_top")


def _other_positions(den: denoiser_mod.DiMOODenoiser) -> tuple[torch.Tensor, int]:
    """Packed positions [R, L] of each row's non-code tokens (short rows repeat their last
    position, a duplicate write of the same K/V) and how many distinct positions there are."""
    is_code = torch.zeros(den.rows.total, dtype=torch.bool, device=den.code_pos.device)
    is_code[den.code_pos.reshape(-1)] = True
    per = []
    for start, length in zip(den.rows.starts.tolist(), den.rows.lengths, strict=True):
        pos = torch.arange(start, start + length, device=is_code.device)
        per.append(pos[~is_code[pos]])
    width = max(len(p) for p in per)
    padded = [torch.cat([p, p[-1:].repeat(width - len(p))]) for p in per]
    return torch.stack(padded), sum(len(p) for p in per)


@contextmanager
def probe(name: str | None, mask_id: int) -> Iterator[dict[str, int]]:
    """Patch the cache path for one probe (None: no patch). Yields a counter dict: ``"uncounted"``
    holds token-forwards to subtract from the run's total (``uncond_stale``)."""
    counter = {"uncounted": 0}
    if name is None:
        yield counter
        return
    name, _, arg = name.partition(":")
    if name not in PROBES:
        raise ValueError(f"probe must be one of {PROBES} (got {name!r})")
    frac = float(arg) if arg else 0.5
    den_cls, cache_cls = denoiser_mod.DiMOODenoiser, cache_mod.BranchCache
    saved = den_cls._cached, cache_cls.update

    def cached_text_fresh(self, seq, codes, need, need_max):  # type: ignore[no-untyped-def]
        if not hasattr(self, "_probe_other"):
            self._probe_other = _other_positions(self)
        other, n_other = self._probe_other
        index = self.branches.pick(need, need_max, 1)
        pos = torch.cat([self.code_pos.gather(1, index), other], dim=1)
        hidden = partial_pass(self.model, seq, self.rows, pos, self.branches.kv)
        r, m = index.shape
        hidden = hidden.view(r, pos.shape[1], -1)[:, :m].reshape(r * m, -1)
        self.stats.token_forwards += index.numel() + n_other
        fresh = self._project(hidden).view(r, m, -1)
        return self.branches.update(index, fresh, codes).float(), index

    def update_uncond_stale(self, index, fresh, codes=None):  # type: ignore[no-untyped-def]
        if self.codes is not None and codes is not None:
            new = codes.gather(1, index)
            stale = (new == mask_id) & (new == self.codes.gather(1, index))
            stale[: index.shape[0] // 2] = False  # cond rows come first: all fresh
            old = self.logits.gather(1, index[..., None].expand(-1, -1, fresh.shape[-1]))
            fresh = torch.where(stale[..., None], old.to(fresh.dtype), fresh)
            counter["uncounted"] += int(stale.sum())
        return saved[1](self, index, fresh, codes)

    def cached_masked_top(self, seq, codes, need, need_max):  # type: ignore[no-untyped-def]
        cache = self.branches
        r, n = codes.shape
        masked = codes == mask_id
        conf = cache.max_logit[: self.batch].repeat(r // self.batch, 1)  # cond rows' order
        order = torch.argsort(conf.masked_fill(~masked, float("-inf")), dim=1,
                              descending=True, stable=True)
        rank = torch.empty_like(order).scatter_(
            1, order, torch.arange(n, device=codes.device).expand_as(order))
        take = torch.ceil(frac * masked.sum(dim=1)).long()
        want = (masked & (rank < take[:, None])) | (need if need is not None else False)
        m = max(int(want.sum(dim=1).max()), cache.next_index.shape[1])  # a sync: probe only
        index = cache.max_logit.masked_fill(want, float("-inf")).topk(
            m, dim=1, largest=False).indices
        hidden = partial_pass(self.model, seq, self.rows, self.code_pos.gather(1, index),
                              cache.kv)
        self.stats.token_forwards += index.numel()
        fresh = self._project(hidden).view(*index.shape, -1)
        return cache.update(index, fresh, codes).float(), index

    if name == "text_fresh":
        den_cls._cached = cached_text_fresh  # type: ignore[method-assign]
    elif name == "masked_top":
        den_cls._cached = cached_masked_top  # type: ignore[method-assign]
    else:
        cache_cls.update = update_uncond_stale  # type: ignore[method-assign]
    try:
        yield counter
    finally:
        den_cls._cached, cache_cls.update = saved  # type: ignore[method-assign]
