"""Native LLaDA transformer (the Lumina-DiMOO backbone) with the official parameter names,
following the official ``LLaDAModel`` with ``block_type="llama"`` (``model/modeling_llada.py``):
per block ``h = x + attn_out(SDPA(RoPE(q_proj(n)), RoPE(k_proj(n)), v_proj(n)))``, ``n =
attn_norm(x)``; ``y = h + ff_out(act(ff_proj(m)) * up_proj(m))``, ``m = ff_norm(h)``;
bidirectional attention. input_ids [B, L] -> logits [B, L, V].

Re-written for inference speed and training: RMSNorm in float32, cast back, then ``weight * x``
(eps ``rms_norm_eps``); RoPE "rotate half" (NeoX) in float32, base ``rope_theta``; ``wte`` (x
``sqrt(d_model)`` if ``input_emb_norm``), no positional table; ``ln_f`` then ``ff_out`` (or
``wte`` with ``weight_tying``), x ``1/sqrt(d_model)`` if ``scale_logits``. The official code
ignores padding; here a key-padding ``attention_mask`` [B, L] (1 = real) masks padded keys and
position ids default to ``cumsum(mask) - 1``, so a padded row equals the row unpadded.

Layers come from an injectable `operations` namespace (`Linear`, `Embedding`; default
`torch.nn`), as ComfyUI models take `comfy.ops`, so a host's classes may cast weights at use or
keep them offloaded under the official names; norm weights and output rows move to the input's
device at use. `device` (None: where the output weight lives) is where inputs go; hosts that
move weights keep it current (ModelPatcher sets `model.device`, as `offload.stream_blocks`).
`state_dict()` keys equal the official checkpoint's (``model.transformer.wte.weight``,
``model.transformer.blocks.{i}.q_proj.weight``, ...).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .config import LLaDAConfig

__all__ = ["HEAD_CHUNK", "LLaDAModel", "LayerKV", "apply_rope", "default_position_ids", "rope_tables"]

#: per-layer (key, value) after RoPE, each [B, n_kv_heads, L, head_dim]
LayerKV = list[tuple[torch.Tensor, torch.Tensor]]


class RMSNorm(nn.Module):
    """Official RMSLayerNorm: normalise in float32, cast back, then ``weight * x (+ bias)``."""

    def __init__(self, size: int, eps: float, bias: bool) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(size))
        self.bias = nn.Parameter(torch.zeros(size)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        out = self.weight.to(x.device) * xf.to(x.dtype)
        return out + self.bias.to(x.device) if self.bias is not None else out


class LayerNorm(nn.Module):
    """Official default LayerNorm (``layer_norm_type="default"``), eps 1e-5."""

    def __init__(self, size: int, bias: bool) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.bias = nn.Parameter(torch.zeros(size)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bias = self.bias.to(x.device) if self.bias is not None else None
        return F.layer_norm(x, self.weight.shape, self.weight.to(x.device), bias, 1e-5)


def _norm(cfg: LLaDAConfig) -> nn.Module:
    if cfg.layer_norm_type == "rms":
        return RMSNorm(cfg.d_model, cfg.rms_norm_eps, cfg.norm_bias)
    return LayerNorm(cfg.d_model, cfg.norm_bias)


_ACT = {"silu": F.silu, "gelu": F.gelu, "relu": F.relu}


def default_position_ids(attention_mask: torch.Tensor | None, batch: int, length: int,
                         device: torch.device) -> torch.Tensor:
    """[B, L] positions: ``cumsum(mask) - 1`` (padding-independent), or ``arange(L)``."""
    if attention_mask is None:
        return torch.arange(length, device=device).expand(batch, length)
    return (attention_mask.long().cumsum(-1) - 1).clamp_min(0)


def rope_tables(position_ids: torch.Tensor, head_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """float32 (cos, sin) [B, 1, L, head_dim] for positions [B, L] (official frequencies)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=position_ids.device,
                                             dtype=torch.float32) / head_dim))
    freqs = position_ids.to(torch.float32)[..., None] * inv_freq
    angles = torch.cat((freqs, freqs), dim=-1)[:, None]
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                full_precision: bool = True) -> torch.Tensor:
    """Official rotate-half RoPE; x [B, H, L, hd] -> same dtype. ``rope_full_precision``
    computes in float32 (LLaDA default), otherwise in x's dtype with cos/sin cast to it."""
    if full_precision:
        xf = x.float()
    else:
        xf, cos, sin = x, cos.to(x.dtype), sin.to(x.dtype)
    x1, x2 = xf.chunk(2, dim=-1)
    rotated = torch.cat((-x2, x1), dim=-1)
    if torch.is_grad_enabled():  # training: autograd keeps the factors as they were
        return (xf * cos + rotated * sin).to(x.dtype)
    # Inference: the same three roundings in place, so two [.., hd] temporaries are alive
    # beside x instead of four (the float32 RoPE of q and k is where a pass peaks)
    del x1, x2
    xf = xf.mul(cos) if xf is x else xf.mul_(cos)
    return xf.add_(rotated.mul_(sin)).to(x.dtype)


class LLaDABlock(nn.Module):
    """One official ``LLaDALlamaBlock`` (pre-norm attention + gated MLP)."""

    def __init__(self, cfg: LLaDAConfig, ops: Any = nn) -> None:
        super().__init__()
        self.cfg = cfg
        kv_dim = cfg.effective_n_kv_heads * cfg.head_dim
        self.attn_norm = _norm(cfg)
        self.ff_norm = _norm(cfg)
        self.q_proj = ops.Linear(cfg.d_model, cfg.d_model, bias=cfg.qkv_bias)
        self.k_proj = ops.Linear(cfg.d_model, kv_dim, bias=cfg.qkv_bias)
        self.v_proj = ops.Linear(cfg.d_model, kv_dim, bias=cfg.qkv_bias)
        self.attn_out = ops.Linear(cfg.d_model, cfg.d_model, bias=cfg.include_bias)
        self.ff_proj = ops.Linear(cfg.d_model, cfg.hidden_size, bias=cfg.include_bias)
        self.up_proj = ops.Linear(cfg.d_model, cfg.hidden_size, bias=cfg.include_bias)
        self.ff_out = ops.Linear(cfg.hidden_size, cfg.d_model, bias=cfg.include_bias)
        self.act = _ACT[cfg.activation_type]

    def qkv(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x [B, M, D] -> q [B, H, M, hd], k/v [B, Hkv, M, hd] (RoPE applied to q and k)."""
        b, m, _ = x.shape
        hd, h, hkv = self.cfg.head_dim, self.cfg.n_heads, self.cfg.effective_n_kv_heads
        n = self.attn_norm(x)
        q = self.q_proj(n).view(b, m, h, hd).transpose(1, 2)
        k = self.k_proj(n).view(b, m, hkv, hd).transpose(1, 2)
        v = self.v_proj(n).view(b, m, hkv, hd).transpose(1, 2)
        full = self.cfg.rope_full_precision
        return apply_rope(q, cos, sin, full), apply_rope(k, cos, sin, full), v

    def finish(self, x: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               key_mask: torch.Tensor | None) -> torch.Tensor:
        """Attention of q [B,H,M,hd] over k/v [B,Hkv,L,hd] + MLP; x [B, M, D] -> [B, M, D]."""
        b, m, d = x.shape
        gqa = self.cfg.n_heads != self.cfg.effective_n_kv_heads  # SDPA groups heads, no K/V copy
        att = F.scaled_dot_product_attention(q, k, v, attn_mask=key_mask, enable_gqa=gqa)
        x = x + self.attn_out(att.transpose(1, 2).reshape(b, m, d))
        del att
        return self.feed_forward(x)

    def feed_forward(self, x: torch.Tensor) -> torch.Tensor:
        """The gated MLP with its residual: x + ff_out(act(ff_proj(n)) * up_proj(n)), n =
        ff_norm(x); x [..., D] (the padded passes' [B, M, D], the packed passes' [T, D])."""
        y = self.ff_norm(x)
        gate = self.act(self.ff_proj(y))
        if torch.is_grad_enabled():  # training: autograd needs the gate as it was
            return x + self.ff_out(gate * self.up_proj(y))
        # Inference: the product in place, so two [M, hidden] buffers are alive at the MLP's
        # peak instead of three (about 0.2 GiB at 1024 px on the 8B model); the same numbers.
        out = self.ff_out(gate.mul_(self.up_proj(y)))
        del gate, y
        return out.add_(x) if out.dtype == x.dtype else x + out  # x + out, bit for bit


class _Backbone(nn.Module):
    """Holds ``transformer`` so parameter names start with ``model.transformer.`` (official)."""

    def __init__(self, cfg: LLaDAConfig, ops: Any = nn) -> None:
        super().__init__()
        modules: dict[str, nn.Module] = {
            "wte": ops.Embedding(cfg.n_embeddings, cfg.d_model),
            "blocks": nn.ModuleList(LLaDABlock(cfg, ops) for _ in range(cfg.n_layers)),
            "ln_f": _norm(cfg),
        }
        if not cfg.weight_tying:
            modules["ff_out"] = ops.Linear(cfg.d_model, cfg.n_embeddings, bias=cfg.include_bias)
        self.transformer = nn.ModuleDict(modules)


HEAD_CHUNK = 8192
"""Vocabulary rows of a quantized output head dequantized at once: the whole head of the 8B
model (134,656 x 4,096) would be about 3 GiB of float32 temporaries and compute-dtype copies per
pass; a chunk of 8,192 rows (the codebook's size: the image tasks' slice is one chunk) is 1/16
of that (model/memory.py ``head_memory`` counts it)."""


def _chunked_head(select: Any, x: torch.Tensor, rows: slice | None, bias: torch.Tensor | None,
                  vocab: int) -> torch.Tensor:
    """``x`` [..., D] times a quantized head's ``rows`` (None: all ``vocab``) -> logits [..., r],
    HEAD_CHUNK rows dequantized at a time: each logit the same dot product as one matmul's."""
    lo, hi, step = (0, vocab, 1) if rows is None else rows.indices(vocab)
    if step != 1 or hi - lo <= HEAD_CHUNK:
        return F.linear(x, select(rows, x.device, x.dtype), bias)
    out = torch.empty(*x.shape[:-1], hi - lo, device=x.device, dtype=x.dtype)
    for a in range(lo, hi, HEAD_CHUNK):
        b = min(hi, a + HEAD_CHUNK)
        part = None if bias is None else bias[a - lo:b - lo]
        out[..., a - lo:b - lo] = F.linear(x, select(slice(a, b), x.device, x.dtype), part)
    return out


class LLaDAModel(nn.Module):
    """LLaDA / Lumina-DiMOO transformer (module docstring): ``forward(input_ids [B, L]) ->
    logits [B, L, V]``, V = ``embedding_size or vocab_size``. Differentiable (no ``no_grad``,
    no dropout), so training scripts use it directly."""

    def __init__(self, config: LLaDAConfig, init_std: float | None = 0.02,
                 operations: Any = None) -> None:
        super().__init__()
        self.config = config
        self.device: torch.device | None = None
        self._block_stream: Any = None  # offload.BlockStream while blocks are streamed
        self.model = _Backbone(config, nn if operations is None else operations)
        if init_std is not None and not any(p.is_meta for p in self.parameters()):
            self.reset_parameters(init_std)

    @classmethod
    def from_config(cls, config: LLaDAConfig | dict, init_std: float | None = 0.02,
                    operations: Any = None) -> LLaDAModel:
        """Build from a config (object or config.json dict) with random N(0, init_std) weights."""
        if isinstance(config, dict):
            config = LLaDAConfig.from_dict(config, source="config dict")
        return cls(config, init_std=init_std, operations=operations)

    def compute_device(self) -> torch.device:
        """Where inputs go: ``self.device`` when a host set it, else the output weight's device."""
        return self.device if self.device is not None else self.output_weight().device

    def reset_parameters(self, std: float = 0.02) -> None:
        """Official ``init_fn="normal"``: N(0, std) for linear/embedding weights, norms to 1, biases 0;
        residual output projections (block ``ff_out``) divided by sqrt(2 n_layers)."""
        with torch.no_grad():
            for name, module in self.named_modules():
                if isinstance(module, (nn.Linear, nn.Embedding)):
                    nn.init.normal_(module.weight, 0.0, std)
                    if ".blocks." in name and name.endswith(".ff_out"):
                        module.weight.div_(math.sqrt(2 * self.config.n_layers))
                    if getattr(module, "bias", None) is not None:
                        nn.init.zeros_(module.bias)
                elif isinstance(module, (RMSNorm, LayerNorm)):
                    nn.init.ones_(module.weight)
                    if module.bias is not None:
                        nn.init.zeros_(module.bias)

    # ---- pieces used by the DiMOO denoiser ----------------------------------------------
    @property
    def blocks(self) -> Sequence[LLaDABlock]:
        """The blocks in order; while streamed (offload.py) iterating brings each to the GPU."""
        blocks = self.model.transformer.blocks
        return blocks if self._block_stream is None else self._block_stream.view(blocks)

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        x = self.model.transformer.wte(input_ids)
        return x * (self.config.d_model ** 0.5) if self.config.input_emb_norm else x

    def output_weight(self) -> torch.Tensor:
        """[V, D] output projection (``ff_out`` or tied ``wte``)."""
        t = self.model.transformer
        return t.wte.weight if self.config.weight_tying else t.ff_out.weight

    def project(self, hidden: torch.Tensor, rows: slice | None = None) -> torch.Tensor:
        """``ln_f`` + output projection restricted to vocab ``rows`` (e.g. the codebook slice)."""
        t = self.model.transformer
        x = t.ln_f(hidden)
        head = t.wte if self.config.weight_tying else t.ff_out
        bias = None if self.config.weight_tying else t.ff_out.bias
        if rows is not None:
            bias = bias[rows] if bias is not None else None
        bias = bias.to(x.device, x.dtype) if bias is not None else None
        select = getattr(head, "weight_rows", None)  # quantized heads decode just these rows
        if select is not None:
            logits = _chunked_head(select, x, rows, bias, self.config.n_embeddings)
        else:
            weight = self.output_weight()
            weight = weight[rows] if rows is not None else weight
            weight = weight.to(x.device, x.dtype)  # no-op unless a host left it elsewhere
            logits = F.linear(x, weight, bias)
        return logits / math.sqrt(self.config.d_model) if self.config.scale_logits else logits

    @staticmethod
    def key_mask(attention_mask: torch.Tensor | None) -> torch.Tensor | None:
        """[B, L] 1/0 -> boolean SDPA mask [B, 1, 1, L] (None when nothing is padded)."""
        if attention_mask is None:
            return None
        return attention_mask.bool()[:, None, None, :]

    def hidden_states(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                      position_ids: torch.Tensor | None = None, return_kv: bool = False
                      ) -> tuple[torch.Tensor, LayerKV | None]:
        """Full pass: last hidden state [B, L, D] (before ln_f) and optionally per-layer K/V."""
        b, length = input_ids.shape
        if position_ids is None:
            position_ids = default_position_ids(attention_mask, b, length, input_ids.device)
        cos, sin = rope_tables(position_ids, self.config.head_dim, self.config.rope_theta)
        mask = self.key_mask(attention_mask)
        x = self.embed(input_ids)
        kv: LayerKV = []
        for block in self.blocks:
            q, k, v = block.qkv(x, cos, sin)
            if return_kv:
                kv.append((k, v))
            x = block.finish(x, q, k, v, mask)
        return x, (kv if return_kv else None)

    def hidden_states_partial(self, input_ids: torch.Tensor, index: torch.Tensor, kv: LayerKV,
                              attention_mask: torch.Tensor | None = None,
                              position_ids: torch.Tensor | None = None) -> torch.Tensor:
        """ML-Cache pass over positions ``index`` [B, M] of ``input_ids`` [B, L], as
        ``packed.partial_pass`` (K/V written into ``kv`` in place) -> hidden states [B, M, D]."""
        b, length = input_ids.shape
        if position_ids is None:
            position_ids = default_position_ids(attention_mask, b, length, input_ids.device)
        pos = position_ids.gather(1, index)
        cos, sin = rope_tables(pos, self.config.head_dim, self.config.rope_theta)
        mask = self.key_mask(attention_mask)
        x = self.embed(input_ids.gather(1, index))
        for block, (k_all, v_all) in zip(self.blocks, kv, strict=True):
            q, k, v = block.qkv(x, cos, sin)
            slot = index[:, None, :, None].expand(-1, k.shape[1], -1, k.shape[-1])
            k_all.scatter_(2, slot, k)
            v_all.scatter_(2, slot, v)
            x = block.finish(x, q, k_all, v_all, mask)
        return x

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None) -> torch.Tensor:
        """input_ids [B, L] (+ key-padding mask [B, L], 1 = real) -> logits [B, L, V]."""
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must be [B, L], got shape {tuple(input_ids.shape)}")
        if attention_mask is not None and attention_mask.shape != input_ids.shape:
            raise ValueError(f"attention_mask shape {tuple(attention_mask.shape)} must equal input_ids "
                             f"shape {tuple(input_ids.shape)}")
        hidden, _ = self.hidden_states(input_ids, attention_mask, position_ids)
        return self.project(hidden)
