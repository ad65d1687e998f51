"""GPU kernel choices for the 8B-shaped model: quantized linears and varlen attention.

Two measurements that decide how the pack computes, each on LLaDA-8B's shapes (d_model 4096,
32 heads of 128, MLP 12288) with random bf16 data (whole calls per weight layout, compiled or
not, and images in flight are measured by ``python -m lab.benchmarks.gpu_check``):

* ``linears``: one block's seven linears (q, k, v, attn_out: 4096 -> 4096; ff_proj, up_proj:
  4096 -> 12288; ff_out: 12288 -> 4096) at the token counts of one CFG pair at 512 px and
  1024 px, per weight format: bf16; fp8 storage upcast at use (the pack's per-channel fp8);
  ``torch._scaled_mm`` fp8 with a static input scale (ComfyUI's fp8 layer without
  ``input_scale``), with a dynamic per-tensor input scale, and rowwise (per-token x per-channel
  scales); int8 ``torch._int_mm`` rowwise; and, when ``comfy_kitchen`` is importable, its fp8
  and int8 ``QuantizedTensor`` linears (what ComfyUI 0.33's ``mixed_precision_ops`` calls). Each
  row: ms per block, speed-up over bf16, relative error of the output against bf16.
* ``attention``: per-row bidirectional attention over packed rows of different lengths (B items,
  cond rows of varied prompt lengths + uncond rows), per layer: one SDPA call per run of
  equal-length rows (the pack's path), one padded SDPA with a key mask, nested jagged SDPA,
  FlexAttention with a document mask.

    python -m lab.benchmarks.gpu_kernels                 # CUDA: gpu_kernels_<device>.json
    python -m lab.benchmarks.gpu_kernels --tiny --device cpu   # smoke test (figures meaningless)
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F

from lab.benchmarks.common import (
    base_parser,
    device_slug,
    median_ms,
    result_name,
    write_result,
)

D, HEADS, HD, MLP = 4096, 32, 128, 12288
BLOCK = {"q": (D, D), "k": (D, D), "v": (D, D), "o": (D, D), "ff_proj": (MLP, D),
         "up": (MLP, D), "ff_out": (D, MLP)}
FP8 = torch.float8_e4m3fn
COND_UNCOND = (64, 24)  # prompt tokens of a typical cond / uncond row


def image_tokens(px: int) -> int:
    g = px // 16
    return g * (g + 1) + 4


# ---------------------------------------------------------------------------------- linears
def _fp8_rows(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    s = (w.float().abs().amax(dim=1) / torch.finfo(FP8).max).clamp_min(1e-12)
    return (w.float() / s[:, None]).to(FP8), s


def _fp8_tensor(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    s = (w.float().abs().amax() / torch.finfo(FP8).max).clamp_min(1e-12)
    return (w.float() / s).to(FP8), s


def _int8_rows(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    s = (w.float().abs().amax(dim=1) / 127).clamp_min(1e-12)
    return (w.float() / s[:, None]).round().clamp(-127, 127).to(torch.int8), s


def _fp8_static(x: torch.Tensor, qs: tuple) -> torch.Tensor:
    q, s = qs
    return torch._scaled_mm(x.to(FP8), q.t(), torch.ones((), device=x.device), s,
                            out_dtype=x.dtype)


def _fp8_dynamic(x: torch.Tensor, qs: tuple) -> torch.Tensor:
    q, s = qs
    sx = (x.abs().amax().float() / torch.finfo(FP8).max).clamp_min(1e-12)
    return torch._scaled_mm((x / sx.to(x.dtype)).to(FP8), q.t(), sx, s, out_dtype=x.dtype)


def _fp8_rowwise(x: torch.Tensor, qs: tuple) -> torch.Tensor:
    q, s = qs
    sx = (x.abs().amax(dim=1, keepdim=True).float() / torch.finfo(FP8).max).clamp_min(1e-12)
    return torch._scaled_mm((x / sx.to(x.dtype)).to(FP8), q.t(), sx, s[None], out_dtype=x.dtype)


def _int8_rowwise(x: torch.Tensor, qs: tuple) -> torch.Tensor:
    q, s = qs
    sx = (x.abs().amax(dim=1, keepdim=True).float() / 127).clamp_min(1e-12)
    x8 = (x / sx.to(x.dtype)).round().clamp(-127, 127).to(torch.int8)
    return (torch._int_mm(x8, q.t()).float() * sx * s[None]).to(x.dtype)


def _methods() -> dict[str, tuple[Callable, Callable]]:
    """name -> (prepare a bf16 weight, linear(x, prepared))."""
    methods: dict[str, tuple[Callable, Callable]] = {
        "bf16": (lambda w: w, lambda x, w: F.linear(x, w)),
        "fp8_upcast": (_fp8_rows, lambda x, qs: F.linear(x, qs[0].to(x.dtype)) * qs[1].to(x.dtype)),
        "fp8_static": (_fp8_tensor, _fp8_static),
        "fp8_dynamic": (_fp8_tensor, _fp8_dynamic),
        "fp8_rowwise": (_fp8_rows, _fp8_rowwise),
        "int8_rowwise": (_int8_rows, _int8_rowwise),
    }
    try:  # comfy_kitchen: the QuantizedTensor linears ComfyUI 0.33's mixed_precision_ops calls
        from comfy_kitchen.tensor import QuantizedTensor
    except ImportError:
        return methods

    def ck_fp8(x: torch.Tensor, w: Any) -> torch.Tensor:  # input scale 1: no input_scale stored
        qx = QuantizedTensor.from_float(x, "TensorCoreFP8Layout",
                                        scale=torch.ones((), device=x.device))
        return F.linear(qx, w)

    methods["kitchen_fp8_static"] = (
        lambda w: QuantizedTensor.from_float(w, "TensorCoreFP8Layout"), ck_fp8)
    methods["kitchen_int8"] = (
        lambda w: QuantizedTensor.from_float(w, "TensorWiseINT8Layout"),
        lambda x, w: F.linear(x, w))
    return methods


def linear_rows(device: torch.device, tiny: bool, reps: int) -> list[dict[str, Any]]:
    g = torch.Generator(device=device).manual_seed(0)
    scale = 1 / 64 if tiny else 1
    ws = [(torch.randn(int(o * scale), int(i * scale), device=device, generator=g) * 0.02
           ).to(torch.bfloat16) for o, i in BLOCK.values()]
    rows = []
    for px in (512, 1024):
        tokens = max(16, int((2 * image_tokens(px) + sum(COND_UNCOND)) * scale))
        # one input per width (ff_out reads the MLP width); activations of unit scale
        xs = {w.shape[1]: torch.randn(tokens, w.shape[1], device=device, generator=g
                                      ).to(torch.bfloat16) for w in ws}
        ref = [F.linear(xs[w.shape[1]], w).float() for w in ws]
        for name, (prep, one) in _methods().items():
            row: dict[str, Any] = {"px": px, "tokens": tokens, "method": name}
            try:
                prepared = [prep(w) for w in ws]

                def block(prepared: list = prepared, one: Callable = one, xs: dict = xs) -> list:
                    return [one(xs[w.shape[1]], p) for w, p in zip(ws, prepared, strict=True)]

                got = [o.float() for o in block()]
                row["rel_err"] = max(float((a - b).norm() / b.norm()) for a, b in zip(got, ref, strict=True))
                row["ms_block"] = median_ms(block, device, reps, warmup=2) if device.type == "cuda" else None
            except (RuntimeError, TypeError, NotImplementedError, ValueError) as exc:
                row["error"] = f"{type(exc).__name__}: {exc}"[:300]
            rows.append(row)
            print("linears", row, flush=True)
    base = {r["px"]: r.get("ms_block") for r in rows if r["method"] == "bf16"}
    for r in rows:
        if r.get("ms_block") and base.get(r["px"]):
            r["speedup_vs_bf16"] = base[r["px"]] / r["ms_block"]
    return rows


# -------------------------------------------------------------------------------- attention
def prompt_lengths(items: int, seed: int) -> list[int]:
    """Cond prompt lengths of ``items`` prompts (20-120 tokens), seeded."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(20, 121, (items,), generator=g).tolist()


def attention_rows(device: torch.device, tiny: bool, reps: int) -> list[dict[str, Any]]:
    from ladr_core.dimoo.model.packed import PackedRows, attend

    heads, hd = (4, 16) if tiny else (HEADS, HD)
    rows = []
    for px in ((64,) if tiny else (512, 1024)):
        for items in ((1, 4) if tiny else (1, 4, 8, 16) if px == 512 else (1, 4, 8)):
            img = image_tokens(px)
            lengths = [n + img for n in prompt_lengths(items, items)]
            lengths += [COND_UNCOND[1] + img] * items
            packed = PackedRows.from_lengths(lengths, device)
            t = packed.total
            g = torch.Generator(device=device).manual_seed(1)
            q, k, v = (torch.randn(t, heads, hd, device=device, generator=g, dtype=torch.bfloat16)
                       for _ in range(3))
            cases = {"per_run_sdpa": partial(attend, q, k, v, packed, None),
                     "padded_sdpa": _padded(q, k, v, lengths),
                     "nested_jagged": _nested(q, k, v, lengths),
                     "flex_document": _flex(q, k, v, lengths)}
            ref = cases["per_run_sdpa"]().float()
            for name, fn in cases.items():
                row: dict[str, Any] = {"px": px, "items": items, "rows": len(lengths),
                                       "tokens": t, "runs": len(packed.runs), "method": name}
                try:
                    if fn is None:
                        raise RuntimeError("not available in this torch build")
                    out = fn().float()
                    row["max_abs_diff"] = float((out - ref).abs().max())
                    row["ms_per_layer"] = median_ms(fn, device, reps, warmup=2)
                except (RuntimeError, TypeError, NotImplementedError, ValueError,
                        AttributeError, ImportError) as exc:
                    row["error"] = f"{type(exc).__name__}: {exc}"[:300]
                rows.append(row)
                print("attention", row, flush=True)
    return rows


def _padded(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: list[int]) -> Callable:
    r, n = len(lengths), max(lengths)
    lens = torch.tensor(lengths, device=q.device)
    keep = torch.arange(n, device=q.device)[None] < lens[:, None]  # [R, n]
    starts = torch.cumsum(lens, 0) - lens

    def gather(x: torch.Tensor) -> torch.Tensor:
        idx = (starts[:, None] + torch.arange(n, device=x.device)[None]).clamp_max(x.shape[0] - 1)
        return x[idx].transpose(1, 2)  # [R, H, n, hd]

    def run() -> torch.Tensor:
        out = F.scaled_dot_product_attention(gather(q), gather(k), gather(v),
                                             attn_mask=keep[:, None, None, :])
        return out.transpose(1, 2)[keep].reshape(-1, q.shape[1] * q.shape[2])
    del r
    return run


def _nested(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: list[int]) -> Callable:
    offsets = torch.tensor([0, *lengths], device=q.device).cumsum(0)

    def nest(x: torch.Tensor) -> torch.Tensor:
        return torch.nested.nested_tensor_from_jagged(x, offsets).transpose(1, 2)

    def run() -> torch.Tensor:
        out = F.scaled_dot_product_attention(nest(q), nest(k), nest(v))
        return out.transpose(1, 2).values().reshape(-1, q.shape[1] * q.shape[2])
    return run


def _flex(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: list[int]) -> Callable | None:
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    except ImportError:
        return None
    if q.device.type != "cuda":
        return None
    doc = torch.repeat_interleave(torch.arange(len(lengths), device=q.device),
                                  torch.tensor(lengths, device=q.device))
    t = doc.numel()

    def same_row(b: Any, h: Any, qi: Any, ki: Any) -> Any:
        return doc[qi] == doc[ki]

    mask = create_block_mask(same_row, None, None, t, t, device=q.device)
    flex = torch.compile(flex_attention, dynamic=False)

    def run() -> torch.Tensor:
        out = flex(q.transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None],
                   block_mask=mask)
        return out[0].transpose(0, 1).reshape(t, -1)
    return run


PARTS = {"linears": linear_rows, "attention": attention_rows}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--device", default=None)
    parser.add_argument("--only", choices=PARTS, action="append")
    args = parser.parse_args(argv)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type != "cuda" and not args.tiny:
        parser.error("the 8B-shaped run needs a CUDA device; use --tiny --device cpu")
    reps = args.reps or (1 if args.tiny else 10)
    parts = args.only or list(PARTS)
    result: dict[str, Any] = {"device": device_slug(device), "tiny": args.tiny}
    for part in parts:
        result[part] = PARTS[part](device, args.tiny, reps)
    if not args.tiny:
        suffix = "" if len(parts) == len(PARTS) else "_" + "_".join(parts)
        print("wrote", write_result(result_name("gpu_kernels", device) + suffix, result, args.out))
    return result


if __name__ == "__main__":
    main()
