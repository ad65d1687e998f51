"""Weight sizes of the 8B Lumina-DiMOO transformer per storage format, on paper (no model).

    python -m benchmarks.experiments.quant_sizes [--json benchmarks/results/quant_sizes.json]

Counts every tensor of LLaDA-8B's shapes (d_model 4096, 32 layers, MLP 12288, vocabulary
134656; benchmarks/gpu_check/models.py's SHAPE_8B) in the format each converter writes: bf16; the pack's fp8
(block linears fp8 + a float32 scale per output row, the rest bf16); ComfyUI fp8 (block
linears fp8 + two float32 scalars) and int8 (+ a float32 scale per output row); GGUF Q8_0,
Q5_K_M and Q4_K_M with gguf_write.py's per-tensor types (bytes per row from ggml.py). The
VQ-VAE is not counted (it stays float in every format). Also an on-paper peak for Q4_K_M at
1024 px: the weights, plus the activations measured for bf16 on an H100 (peak minus resident,
benchmarks/results/gpu_nvidia_h100_80gb_hbm3.json), plus the largest per-layer dequantization
(codes, float32 and bf16 copies of the biggest matrix; the head's codebook rows).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ladr_core.dimoo import ggml, tensor_type

ROOT = Path(__file__).resolve().parents[2]
D, LAYERS, MLP, VOCAB, CODEBOOK = 4096, 32, 12288, 134656, 8192
LINEARS = {"q_proj": (D, D), "k_proj": (D, D), "v_proj": (D, D), "attn_out": (D, D),
           "ff_proj": (MLP, D), "up_proj": (MLP, D), "ff_out": (D, MLP)}
GIB = 2.0 ** 30


def tensors() -> list[tuple[str, list[int]]]:
    """(name without model.transformer., shape) of every transformer tensor of the 8B model."""
    out: list[tuple[str, list[int]]] = [("wte.weight", [VOCAB, D])]
    for i in range(LAYERS):
        out += [(f"blocks.{i}.attn_norm.weight", [D]), (f"blocks.{i}.ff_norm.weight", [D])]
        out += [(f"blocks.{i}.{n}.weight", list(s)) for n, s in LINEARS.items()]
    return out + [("ln_f.weight", [D]), ("ff_out.weight", [VOCAB, D])]


def _numel(shape: list[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def folder_bytes(fmt: str) -> int:
    """Bytes of the transformer in a folder format (bf16, fp8, comfy_fp8, comfy_int8)."""
    total = 0
    for name, shape in tensors():
        block_linear = name.startswith("blocks.") and len(shape) == 2
        if fmt == "bf16" or not block_linear:
            total += 2 * _numel(shape)
        elif fmt == "comfy_fp8":
            total += _numel(shape) + 8  # weight_scale and input_scale scalars
        else:  # fp8 per channel, int8 per channel: one float32 scale per output row
            total += _numel(shape) + 4 * shape[0]
    return total


def gguf_bytes(recipe: str) -> tuple[int, dict[str, int]]:
    """Bytes of the transformer in a GGUF recipe, and bytes per GGML type."""
    per: dict[str, int] = {}
    for name, shape in tensors():
        kind, flat = tensor_type(recipe, name, shape, LAYERS)
        assert not flat, name  # every 8B row is a whole number of blocks
        rows = shape[0] if len(shape) == 2 else 1
        per[kind] = per.get(kind, 0) + rows * ggml.row_bytes(kind, shape[-1])
    return sum(per.values()), per


def q4_peak_on_paper(weights: int, h100: Path) -> dict[str, float]:
    mem = json.loads(h100.read_text())["memory"]["bf16"]
    activations = (mem["peak_gib"] - mem["resident_gib"]) * GIB
    n = MLP * D  # the largest block matrix, dequantized at use
    dequant = n * (1 + 4 + 2) + n * 144 // 256  # uint8 codes, float32, bf16, its own bytes
    head_rows = CODEBOOK * D * (4 + 2)  # the head's codebook rows decoded (float32 + bf16)
    peak = weights + activations + dequant + head_rows
    return {"weights_gib": weights / GIB, "activations_gib": activations / GIB,
            "largest_dequant_gib": dequant / GIB, "head_rows_gib": head_rows / GIB,
            "peak_gib": peak / GIB}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "quant_sizes.json"))
    a = ap.parse_args(argv)
    params = sum(_numel(s) for _, s in tensors())
    rows = {f: {"bytes": folder_bytes(f)} for f in ("bf16", "fp8", "comfy_fp8", "comfy_int8")}
    for recipe in ("Q8_0", "Q5_K_M", "Q4_K_M"):
        total, per = gguf_bytes(recipe)
        rows[recipe] = {"bytes": total, "by_type": per}
    for r in rows.values():
        r["gb"], r["gib"], r["bits_per_weight"] = r["bytes"] / 1e9, r["bytes"] / GIB, \
            8 * r["bytes"] / params
    h100 = ROOT / "benchmarks" / "results" / "gpu_nvidia_h100_80gb_hbm3.json"
    out = {"params": params, "formats": rows,
           "q4_k_m_peak_1024px_on_paper": q4_peak_on_paper(rows["Q4_K_M"]["bytes"], h100)}
    for name, r in rows.items():
        print(f"{name:11s} {r['gb']:6.2f} GB {r['gib']:6.2f} GiB {r['bits_per_weight']:5.2f} bit/w")
    print(json.dumps(out["q4_k_m_peak_1024px_on_paper"], indent=1))
    Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {a.json}")
    return out


if __name__ == "__main__":
    main()
