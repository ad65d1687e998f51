"""Padding-free transformer passes over rows of different lengths (cond + uncond CFG rows).

The rows' real tokens run back to back through every linear layer, attention per run of
equal-length rows on each row's true length, positions restarting per row, so each row equals
its official unpadded sequence (<= 1e-4 in float32, tested). K/V caches (ML-Cache) are per
row and per layer ``(k, v)`` [L, Hkv, hd], RoPE applied to k: ``full_pass(..., kv_sink=...)``
hands each layer's fresh packed K/V to a callback that copies every row's part into its cache;
``partial_pass`` recomputes some positions of some rows, writes their K/V into their rows'
caches in place and attends over each row's whole cache.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ...devices import to_device
from .transformer import LayerKV, LLaDABlock, LLaDAModel, apply_rope, rope_tables

__all__ = ["PackedRows", "full_pass", "partial_pass"]


@dataclass(frozen=True)
class PackedRows:
    """R rows of ``lengths`` packed into T = sum(lengths) tokens: ``runs`` (first row, count,
    length, first token) of equal-length consecutive rows, ``starts`` [R] each row's first
    token, ``positions`` [T] each token's position in its row (RoPE)."""

    lengths: tuple[int, ...]
    runs: tuple[tuple[int, int, int, int], ...]
    starts: torch.Tensor
    positions: torch.Tensor

    @classmethod
    def from_lengths(cls, lengths: list[int] | tuple[int, ...],
                     device: torch.device | str = "cpu") -> PackedRows:
        if not lengths or any(int(n) < 1 for n in lengths):
            raise ValueError(f"every packed row needs >= 1 token (got lengths {list(lengths)})")
        lengths = tuple(int(n) for n in lengths)
        runs: list[tuple[int, int, int, int]] = []
        token = 0
        for row, n in enumerate(lengths):
            if runs and runs[-1][2] == n:
                first, count, _, start = runs[-1]
                runs[-1] = (first, count + 1, n, start)
            else:
                runs.append((row, 1, n, token))
            token += n
        starts = torch.tensor([0, *lengths[:-1]], dtype=torch.long).cumsum(0)
        positions = torch.cat([torch.arange(n) for n in lengths])
        device = torch.device(device)  # copied without a host wait (a rolling batch makes
        # new packs inside its loop)
        return cls(lengths, tuple(runs), to_device(starts, device), to_device(positions, device))

    @property
    def total(self) -> int:
        return sum(self.lengths)


def _qkv(block: LLaDABlock, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x [T, D] -> q [T, H, hd], k/v [T, Hkv, hd] (RoPE on q and k; cos/sin [T, 1, hd])."""
    cfg = block.cfg
    t, full = x.shape[0], cfg.rope_full_precision
    n = block.attn_norm(x)
    # each projection rotated as soon as it is made: the unrotated q is gone before k exists
    q = apply_rope(block.q_proj(n).view(t, cfg.n_heads, cfg.head_dim), cos, sin, full)
    k = apply_rope(block.k_proj(n).view(t, cfg.effective_n_kv_heads, cfg.head_dim), cos, sin,
                   full)
    return q, k, block.v_proj(n).view(t, cfg.effective_n_kv_heads, cfg.head_dim)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rows: PackedRows,
            queries_per_row: int | None) -> torch.Tensor:
    """Per-row bidirectional attention, q [Tq, H, hd], k/v [T, Hkv, hd] -> [Tq, H * hd]; q
    holds every token (``queries_per_row`` None) or M queries per row (partial pass)."""
    gqa = q.shape[1] != k.shape[1]
    outs = []
    for first, count, length, start in rows.runs:
        m = length if queries_per_row is None else queries_per_row
        q0 = start if queries_per_row is None else first * m
        qs = q[q0: q0 + count * m].view(count, m, *q.shape[1:]).transpose(1, 2)
        ks = k[start: start + count * length].view(count, length, *k.shape[1:]).transpose(1, 2)
        vs = v[start: start + count * length].view(count, length, *v.shape[1:]).transpose(1, 2)
        att = F.scaled_dot_product_attention(qs, ks, vs, enable_gqa=gqa)
        outs.append(att.transpose(1, 2).reshape(count * m, -1))
    return outs[0] if len(outs) == 1 else torch.cat(outs)




KVSink = Callable[[int, torch.Tensor, torch.Tensor], None]
"""(layer, k [T, Hkv, hd], v [T, Hkv, hd]) of one full pass, in packed order."""


def full_pass(model: LLaDAModel, input_ids: torch.Tensor, rows: PackedRows,
              kv_sink: KVSink | None = None) -> torch.Tensor:
    """Packed ids [T] -> last hidden states [T, D] (before ln_f); ``kv_sink`` receives each
    layer's K/V (k after RoPE) as soon as made (the ML-Cache keeps each row's part)."""
    cos, sin = rope_tables(rows.positions[None], model.config.head_dim, model.config.rope_theta)
    cos, sin = cos[0, 0, :, None], sin[0, 0, :, None]  # [T, 1, hd]
    x = model.embed(input_ids)
    for i, block in enumerate(model.blocks):
        q, k, v = _qkv(block, x, cos, sin)
        if kv_sink is not None:
            kv_sink(i, k, v)
        att = attend(q, k, v, rows, None)
        del q, k, v  # not alive through the MLP nor the next layer's projections
        x = x + block.attn_out(att)
        del att
        x = block.feed_forward(x)
    return x


def partial_pass(model: LLaDAModel, ids: torch.Tensor, positions: torch.Tensor,
                 counts: list[int], kv: list[LayerKV]) -> torch.Tensor:
    """ML-Cache pass: recompute counts[r] positions of each row r, attending over its cache.

    ids / positions [sum(counts)], rows in order; kv[r]: row r's per-layer (k, v)
    [L_r, Hkv, hd], overwritten in place at those positions (official ``LLaDALlamaBlock``
    cache update); one SDPA per row over its cache, so items can come and go. -> hidden
    states [sum(counts), D].
    """
    cos, sin = rope_tables(positions[None], model.config.head_dim, model.config.rope_theta)
    cos, sin = cos[0, 0, :, None], sin[0, 0, :, None]
    x = model.embed(ids)
    local = positions.split(counts)
    for i, block in enumerate(model.blocks):
        q, k, v = _qkv(block, x, cos, sin)
        gqa = q.shape[1] != k.shape[1]
        outs = []
        for r, (qr, kr, vr) in enumerate(zip(q.split(counts), k.split(counts), v.split(counts),
                                             strict=True)):
            k_all, v_all = kv[r][i]
            k_all.index_copy_(0, local[r], kr)
            v_all.index_copy_(0, local[r], vr)
            att = F.scaled_dot_product_attention(qr.transpose(0, 1)[None],
                                                 k_all.transpose(0, 1)[None],
                                                 v_all.transpose(0, 1)[None], enable_gqa=gqa)
            outs.append(att[0].transpose(0, 1).reshape(qr.shape[0], -1))
        del q, k, v, qr, kr, vr, att, k_all, v_all
        att = outs[0] if len(outs) == 1 else torch.cat(outs)
        del outs
        x = x + block.attn_out(att)
        del att
        x = block.feed_forward(x)
    return x
