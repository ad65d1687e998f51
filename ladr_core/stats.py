"""Per-item statistics of one step's logits, for the sampling loop (ladr_core.sampling).

As the official loop does, each item's statistics come from the logits of its still-masked
positions only ([L_i, K] rows, row j = its j-th masked position in index order): argmax or
Gumbel-max, one softmax, top-2 and a gather, written into reusable work buffers; the rows'
values are then stacked to [B, M] and moved to positions [B, N] (0 elsewhere).
"""

from __future__ import annotations

import math

import torch

from .step import Needs, Stats

PROB_STATS = frozenset({"entropy", "log_conf", "top1", "margin", "argmax"})
"""The statistics read from the softmax (the others need none)."""


def masked_first(masked: torch.Tensor, counts: list[int]) -> torch.Tensor | None:
    """Positions of each item's masked tokens first, LongTensor [B, M], M = max(counts) (the
    host's per-item sums; shorter items padded with decoded positions); a stable sort keeps
    the official `logits[:, vq_mask[0]]` order, no host sync. None when all is masked.
    """
    if min(counts) == masked.shape[1]:
        return None
    order = torch.argsort((~masked).to(torch.uint8), dim=1, stable=True)
    return order[:, : max(counts)]


def item_rows(
    logits: torch.Tensor, idx: torch.Tensor | None, own: torch.Tensor | None
) -> torch.Tensor:
    """One item's logit rows [L, K] at positions idx [L] (None: all N), gathered or upcast to
    float32 (probabilities near tau are not rounded away) into ``own``, the step's reusable
    buffer; the denoiser's tensor is never modified."""
    if own is None:
        return logits
    if idx is None:
        return own.copy_(logits)
    out = own[: idx.shape[0]]
    if own.dtype == logits.dtype:
        return torch.index_select(logits, 0, idx, out=out)
    return out.copy_(logits.index_select(0, idx))


def to_positions(
    fields: dict[str, torch.Tensor | None], idx: torch.Tensor | None, n: int
) -> dict[str, torch.Tensor | None]:
    """Row-space values [B, M] -> [B, N] at positions idx (0 elsewhere; None stays None);
    fields of one dtype move together: a GPU step at B = 1 is bound by its kernel count."""
    if idx is None:
        return dict(fields)
    out: dict[str, torch.Tensor | None] = dict.fromkeys(fields)
    groups: dict[torch.dtype, list[str]] = {}
    for name, vals in fields.items():
        if vals is not None:
            groups.setdefault(vals.dtype, []).append(name)
    for names in groups.values():
        vals = torch.stack([fields[name] for name in names])  # [F, B, M]
        where = idx.expand(len(names), *idx.shape)
        moved = vals.new_zeros((len(names), idx.shape[0], n)).scatter_(2, where, vals)
        out.update(zip(names, moved.unbind(0), strict=True))
    return out


def top2_(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``x.topk(2)``'s values and the largest's index per row of x [L, K], overwriting x.
    Two max reductions and a scatter: a GPU top-k over [4096, 8192] costs several max
    reductions (it was most of a LADR step's device time)."""
    first, index = x.max(dim=-1)
    second = x.scatter_(-1, index.unsqueeze(-1), -math.inf).amax(dim=-1)
    return first, second, index


def item_stats(x: torch.Tensor, needs: Needs, sampled: torch.Tensor | None,
               buf: torch.Tensor) -> Stats:
    """The per-token statistics a strategy needs from one item's logit rows x [L, K]: [L] each.

    One softmax (only for PROB_STATS), then the top two of it or of the logits (logit_gap),
    a gather for p(sampled) (the official loop's on its masked rows) and the entropy if asked.
    sampled: the Gumbel-max sample [L], None for greedy. buf: a free float32 [L, K] buffer
    (the consumed noise) that takes a float32 x's softmax, and first logit_gap's copy of x.
    """
    if sampled is None:
        sampled = x.argmax(dim=-1)
    out = Stats(sampled)
    want = needs.stats
    own = buf if buf.dtype == x.dtype else None
    if "logit_gap" in want:
        first, second, _ = top2_(own.copy_(x) if own is not None else x.clone())
        out.logit_gap = first - second
    if not want & PROB_STATS:  # e.g. Halton: the sample alone, no [L, K] softmax
        return out
    probs = torch.softmax(x, dim=-1, out=own)
    if "entropy" in want:  # before top2_, which overwrites probs; entr(0) = 0, no 0 * log 0
        out.entropy = torch.special.entr(probs).sum(dim=-1)
    if "log_conf" in want:
        conf = probs.gather(-1, sampled.unsqueeze(-1)).squeeze(-1)
        out.log_conf = torch.log(conf.clamp_min(1e-20))
    if want & {"top1", "margin", "argmax"}:
        out.top1, second, out.argmax = top2_(probs)  # probs is ours: overwritten
        out.margin = out.top1 - second
    return out


def stack_rows(parts: list[tuple[int, int, object]], b: int, m: int, fields: tuple[str, ...],
                like: torch.Tensor) -> dict[str, torch.Tensor | None]:
    """Per-item [L_i] fields -> [B, M] (0 in padding and for items with nothing masked)."""
    out: dict[str, torch.Tensor | None] = dict.fromkeys(fields)
    if b == 1 and len(parts) == 1 and parts[0][1] == m:  # one item fills the rows: views
        for name in fields:
            v = getattr(parts[0][2], name)
            out[name] = None if v is None else v.unsqueeze(0)
        return out
    for i, count, part in parts:
        for name in fields:
            v = getattr(part, name)
            if v is None:
                continue
            if out[name] is None:
                out[name] = like.new_zeros((b, m), dtype=v.dtype)
            out[name][i, :count] = v
    return out


__all__ = ["PROB_STATS", "item_rows", "item_stats", "masked_first", "stack_rows", "to_positions",
           "top2_"]
