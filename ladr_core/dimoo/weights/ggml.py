"""GGML block formats in torch: quantize on conversion, dequantize per layer at use.

Byte layouts are GGML's (llama.cpp ``ggml-common.h``; the tests compare with the ``gguf``
package's reference dequantizers bit for bit). A row of ``n`` weights is ``n / block`` blocks
end to end; functions here take a uint8 ``[rows, row_bytes]`` and a float ``[rows, n]``:

* `Q8_0` (block 32, 34 bytes): fp16 `d`, 32 x int8 `q`; `w = d q`.
* `Q4_K` (super-block 256, 144 bytes): fp16 `d` and `dmin`, 12 bytes of eight 6-bit sub-block
  scales `sc` and mins `m`, 128 bytes of 4-bit `q`; `w = d sc_j q - dmin m_j` per sub-block.
* `Q5_K` (256, 176 bytes): Q4_K plus a fifth bit per weight in 32 `qh` bytes.
* `Q6_K` (256, 210 bytes): 128 bytes low nibbles, 64 bytes high 2 bits, 16 int8 scales (one
  per 16 weights), fp16 `d`; `w = d s_g (q - 32)`.

The quantizers are the project's own: Q8_0 rounds to nearest (as GGML); the K formats take the
sub-block range (min clamped <= 0) and refit scale and min by least squares on the chosen codes
once, before the 6-bit scale codes are fixed. Dequantization is the format's definition,
rounded once to the requested dtype: Q8_0 into float16 directly (fp16 `d` times int8 `q`, exact
before the rounding), everything else through float32 (bf16 cannot hold the fp16 scales and
the K formats take several operations). A GGUF layer (gguf.py) dequantizes its whole matrix per
call, as ComfyUI-GGUF does: the price of keeping no float copy.
"""

from __future__ import annotations

import torch

__all__ = ["GGML_TYPES", "BLOCK", "block_bytes", "row_bytes", "quantize", "dequantize",
           "supported"]

QK = 256  # K-quant super-block
#: GGML type id -> (name, weights per block, bytes per block); ids are GGMLQuantizationType's
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 30: ("BF16", 1, 2), 8: ("Q8_0", 32, 34),
    12: ("Q4_K", QK, 144), 13: ("Q5_K", QK, 176), 14: ("Q6_K", QK, 210)}
BLOCK = {name: (tid, n, b) for tid, (name, n, b) in GGML_TYPES.items()}


def supported(name: str) -> bool:
    return name in BLOCK


def block_bytes(name: str) -> tuple[int, int]:
    """(weights per block, bytes per block) of a type name."""
    _, n, b = BLOCK[name]
    return n, b


def row_bytes(name: str, n: int) -> int:
    """Bytes of a row of ``n`` weights; ValueError when ``n`` is not a whole number of blocks."""
    per, size = block_bytes(name)
    if n % per:
        raise ValueError(f"{name} needs rows of a multiple of {per} weights, got {n}")
    return n // per * size


def _f16(raw: torch.Tensor) -> torch.Tensor:
    """[..., 2] uint8 -> [...] float32 (little-endian fp16)."""
    return raw.contiguous().view(torch.float16).squeeze(-1).float()


def _f16_bytes(x: torch.Tensor) -> torch.Tensor:
    """[...] float -> [..., 2] uint8 (fp16 little-endian)."""
    return x.to(torch.float16).unsqueeze(-1).view(torch.uint8)


# ---------------------------------------------------------------- dequantize
# Codes are unpacked in uint8 and turned into float32 once; scales are applied in place, so a
# matrix of n weights needs n bytes of codes and 4n bytes of floats on top of its GGML bytes.
def _deq_q8_0(b: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    q = b[:, 2:].contiguous().view(torch.int8)
    if dtype == torch.float16:  # exact product rounded once (module docstring)
        return q.to(torch.float16).mul_(b[:, :2].contiguous().view(torch.float16))
    return q.float().mul_(_f16(b[:, :2])[:, None])


def _unpack_scales(s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """12 packed bytes [B, 12] -> 6-bit scales and mins [B, 8] (int32)."""
    s = s.to(torch.int32)
    lo_d, lo_m, hi = s[:, 0:4], s[:, 4:8], s[:, 8:12]
    sc = torch.cat([lo_d & 63, (hi & 15) | ((lo_d >> 2) & 48)], dim=1)
    mn = torch.cat([lo_m & 63, (hi >> 4) | ((lo_m >> 2) & 48)], dim=1)
    return sc, mn


def _nibbles(qs: torch.Tensor) -> torch.Tensor:
    """[B, 128] bytes -> [B, 8, 32] uint8 4-bit codes (sub-block 2g: low nibbles of group g)."""
    q = qs.contiguous().view(-1, 4, 1, 32)
    return torch.cat([q & 15, q >> 4], dim=2).view(-1, 8, 32)


def _deq_k(b: torch.Tensor, five: bool) -> torch.Tensor:
    d, dmin = _f16(b[:, 0:2]), _f16(b[:, 2:4])
    sc, mn = _unpack_scales(b[:, 4:16])
    q = _nibbles(b[:, -128:])
    if five:
        shifts = torch.arange(8, dtype=torch.uint8, device=b.device).view(1, 8, 1)
        hbits = (b[:, 16:48].contiguous().view(-1, 1, 32) >> shifts) & 1
        q |= hbits << 4
    w = q.float().mul_((d[:, None] * sc)[:, :, None])
    return w.sub_((dmin[:, None] * mn)[:, :, None]).view(-1, QK)


def _deq_q6_k(b: torch.Tensor) -> torch.Tensor:
    ql = b[:, 0:128].contiguous().view(-1, 2, 1, 64)
    low = torch.cat([ql & 15, ql >> 4], dim=2).view(-1, 2, 128)
    shifts = (2 * torch.arange(4, dtype=torch.uint8, device=b.device)).view(1, 1, 4, 1)
    high = ((b[:, 128:192].contiguous().view(-1, 2, 1, 32) >> shifts) & 3).view(-1, 2, 128)
    q = (low | (high << 4)).view(-1, 16, 16)
    scales = b[:, 192:208].contiguous().view(torch.int8).float()
    d = _f16(b[:, 208:210])
    w = q.float().sub_(32).mul_((d[:, None] * scales)[:, :, None])
    return w.view(-1, QK)


#: type -> (blocks, requested dtype) -> float32 or, where exact, the requested dtype
_DEQ = {"Q8_0": _deq_q8_0, "Q4_K": lambda b, dt: _deq_k(b, False),
        "Q5_K": lambda b, dt: _deq_k(b, True), "Q6_K": lambda b, dt: _deq_q6_k(b)}


def dequantize(data: torch.Tensor, name: str, n: int, dtype: torch.dtype = torch.float32
               ) -> torch.Tensor:
    """uint8 ``[rows, row_bytes]`` of type ``name`` -> ``[rows, n]`` in ``dtype`` (float types
    reinterpreted, block types decoded)."""
    rows = data.shape[0]
    if name in ("F32", "F16", "BF16"):
        view = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}[name]
        return data.contiguous().view(view).view(rows, n).to(dtype)
    per, size = block_bytes(name)
    blocks = data.reshape(-1, size)
    return _DEQ[name](blocks, dtype).view(rows, n).to(dtype)


# ---------------------------------------------------------------- quantize
def _q8_0(x: torch.Tensor) -> torch.Tensor:
    blocks = x.reshape(-1, 32)
    d = blocks.abs().amax(dim=1) / 127
    d16 = d.to(torch.float16).float()
    inv = torch.where(d > 0, 1.0 / d, torch.zeros_like(d))
    q = (blocks * inv[:, None]).round().clamp(-127, 127).to(torch.int8)
    del d16
    return torch.cat([_f16_bytes(d), q.view(torch.uint8)], dim=1)


def _codes(scale: torch.Tensor, top: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sub-block float scales [B, 8] (>= 0) -> (fp16-rounded super scale [B], 6-bit
    codes [B, 8]) with ``super * code ~= scale``."""
    sup = (scale.amax(dim=1) / top).to(torch.float16).float()
    inv = torch.where(sup > 0, 1.0 / sup, torch.zeros_like(sup))
    return sup, (scale * inv[:, None]).round().clamp(0, top)


def _fit_k(x: torch.Tensor, levels: int) -> tuple[torch.Tensor, ...]:
    """Asymmetric fit of sub-blocks x [B, 8, 32] to codes 0..levels: returns d, dmin [B],
    6-bit scale and min codes [B, 8] and the codes q [B, 8, 32]."""
    lo = x.amin(dim=2).clamp(max=0)
    scale = (x.amax(dim=2) - lo) / levels
    for refit in (False, True):
        d, sc = _codes(scale, 63)
        dmin, mn = _codes(-lo, 63)
        s, m = (d[:, None] * sc)[:, :, None], (dmin[:, None] * mn)[:, :, None]
        q = ((x + m) / torch.where(s > 0, s, torch.ones_like(s))).round().clamp(0, levels)
        if refit:
            break
        # least squares x ~= s q - m on the chosen codes, min kept <= 0 and scale >= 0
        n = x.shape[2]
        sq, sx, sqq, sqx = q.sum(2), x.sum(2), (q * q).sum(2), (q * x).sum(2)
        det = n * sqq - sq * sq
        ok = det > 0
        s_ls = torch.where(ok, (n * sqx - sq * sx) / torch.where(ok, det, 1), scale)
        m_ls = torch.where(ok, (s_ls * sq - sx) / n, -lo)
        good = (s_ls > 0) & (m_ls >= 0)
        scale, lo = torch.where(good, s_ls, scale), torch.where(good, -m_ls, lo)
    return d, dmin, sc.to(torch.int32), mn.to(torch.int32), q.to(torch.int32)


def _pack_scales(sc: torch.Tensor, mn: torch.Tensor) -> torch.Tensor:
    """6-bit scales and mins [B, 8] -> the 12 packed bytes [B, 12] (inverse of _unpack_scales)."""
    lo_d = sc[:, :4] | ((sc[:, 4:] >> 4) << 6)
    lo_m = mn[:, :4] | ((mn[:, 4:] >> 4) << 6)
    hi = (sc[:, 4:] & 15) | ((mn[:, 4:] & 15) << 4)
    return torch.cat([lo_d, lo_m, hi], dim=1).to(torch.uint8)


def _q_k(x: torch.Tensor, five: bool) -> torch.Tensor:
    sub = x.reshape(-1, 8, 32)
    d, dmin, sc, mn, q = _fit_k(sub, 31 if five else 15)
    low = (q & 15).view(-1, 4, 2, 32)
    qs = (low[:, :, 0] | (low[:, :, 1] << 4)).reshape(-1, 128).to(torch.uint8)
    parts = [_f16_bytes(d), _f16_bytes(dmin), _pack_scales(sc, mn)]
    if five:
        bits = (q >> 4) << torch.arange(8, device=q.device).view(1, 8, 1)
        parts.append(bits.sum(dim=1).to(torch.uint8))
    return torch.cat([*parts, qs], dim=1)


def _q6_k(x: torch.Tensor) -> torch.Tensor:
    g = x.reshape(-1, 16, 16)
    scale = torch.maximum(g.amax(dim=2) / 31, -g.amin(dim=2) / 32).clamp(min=0)
    d = (scale.amax(dim=1) / 127).to(torch.float16).float()
    inv = torch.where(d > 0, 1.0 / d, torch.zeros_like(d))
    sc = (scale * inv[:, None]).round().clamp(0, 127)
    s = (d[:, None] * sc)[:, :, None]
    q = (g / torch.where(s > 0, s, torch.ones_like(s))).round().clamp(-32, 31).to(torch.int32) + 32
    q = q.view(-1, 2, 128)
    low, high = q & 15, q >> 4
    ql = (low[:, :, :64] | (low[:, :, 64:] << 4)).reshape(-1, 128)
    hv = high.view(-1, 2, 4, 32) << (2 * torch.arange(4, device=q.device)).view(1, 1, 4, 1)
    qh = hv.sum(dim=2).reshape(-1, 64)
    return torch.cat([ql.to(torch.uint8), qh.to(torch.uint8),
                      sc.to(torch.int8).view(torch.uint8), _f16_bytes(d)], dim=1)


_QUANT = {"Q8_0": _q8_0, "Q4_K": lambda x: _q_k(x, False), "Q5_K": lambda x: _q_k(x, True),
          "Q6_K": _q6_k}


def quantize(weight: torch.Tensor, name: str) -> torch.Tensor:
    """Float ``[rows, n]`` -> uint8 ``[rows, row_bytes(name, n)]`` in GGML type ``name``,
    computed in float32 on ``weight``'s device."""
    rows, n = weight.shape
    if name in ("F32", "F16", "BF16"):
        dt = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}[name]
        return weight.to(dt).contiguous().view(torch.uint8).view(rows, -1)
    size = row_bytes(name, n)
    out = _QUANT[name](weight.float().contiguous())
    return out.view(rows, size)
