"""Which DiMOO-nano tensors tolerate quantization: the logits error of quantizing one group.

    OMP_NUM_THREADS=1 nice -n 10 python -m benchmarks.experiments.quant_layers \
        --json benchmarks/results/quant_layers.json

Starting from the fp32 model each case rounds ONE group of tensors through a format and
measures the sampler's codebook logits against fp32 (``quant_quality.logit_calls``: 16 test
captions x masked 1.0 / 0.5 / 0.1): relative error (mean) and argmax agreement.

Groups: all block linears; the embedding ``wte``; the output head ``ff_out``; the norms
(``attn_norm``, ``ff_norm``, ``ln_f``); each of the seven linear kinds over all blocks; each
block's seven linears. Formats (weights rounded and stored back in float32, i.e. the storage
error alone): ``fp8`` (e4m3fn, one scale per tensor, ComfyUI's layout), ``int8`` (one scale per
output row), ``Q8_0``, ``Q4_K`` (256-weight super-blocks over the flattened tensor; tensors
whose size is not a multiple of 256, nano's embedding and head, are marked n/a). And ``A8``: the
group's INPUTS rounded to fp8 with calibrated per-tensor scales (2 x the max seen on 16
validation captions), the activation half of ComfyUI's fast fp8 path (for the head: the output
of ``ln_f``, which the head multiplies; the embedding has no input).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from benchmarks.quality import prompt_set
from benchmarks.quant_quality import logit_calls, logit_errors
from ladr_core import load_dimoo, nano_model_path
from ladr_core.dimoo import fp8, ggml, measure_input_ranges, quant
from testbed import scenes

ROOT = Path(__file__).resolve().parents[2]
FORMATS = ("fp8", "int8", "Q8_0", "Q4_K", "A8")


def groups(n_layers: int) -> dict[str, Callable[[str], bool]]:
    """Group name -> predicate over parameter names (official, model.transformer....)."""
    def linear(name: str) -> bool:
        return ".blocks." in name and name.split(".")[-2] in fp8.BLOCK_LINEARS

    out: dict[str, Callable[[str], bool]] = {
        "block linears": linear,
        "embedding": lambda n: n.endswith("wte.weight"),
        "head": lambda n: n == "model.transformer.ff_out.weight",
        "norms": lambda n: "norm" in n or "ln_f" in n}
    for kind in fp8.BLOCK_LINEARS:
        out[kind] = lambda n, k=kind: linear(n) and n.split(".")[-2] == k
    for i in range(n_layers):
        out[f"block {i}"] = lambda n, i=i: linear(n) and f".blocks.{i}." in n
    return out


def fake_quant(w: torch.Tensor, fmt: str) -> torch.Tensor | None:
    """``w`` rounded through ``fmt`` and back to float32 (None: the format cannot hold it)."""
    w2 = w.reshape(1, -1) if w.dim() == 1 else w
    if fmt == "fp8":
        p = quant.quantize_layer(w2, "float8_e4m3fn")
        return (p["weight"].float() * p["weight_scale"]).reshape(w.shape)
    if fmt == "int8":
        p = quant.quantize_layer(w2, "int8_tensorwise")
        return (p["weight"].float() * p["weight_scale"]).reshape(w.shape)
    per = ggml.block_bytes(fmt)[0]
    flat = w2 if w2.shape[-1] % per == 0 else w.reshape(-1, per) if w.numel() % per == 0 else None
    if flat is None:
        return None
    return ggml.dequantize(ggml.quantize(flat, fmt), fmt, flat.shape[-1]).reshape(w.shape)


def _fp8_round(x: torch.Tensor, scale: float) -> torch.Tensor:
    s = torch.tensor(scale)
    return (x / s).clamp(-448, 448).to(torch.float8_e4m3fn).float() * s


def input_hooks(pipe: Any, pred: Callable[[str], bool], amax: dict[str, float]) -> list:
    """Forward hooks rounding the inputs of the group's linears (head: ln_f's output)."""
    handles = []
    for name, module in pipe.transformer.named_modules():
        layer = name
        if layer in amax and pred(layer + ".weight"):
            s = 2 * amax[layer] / 448
            handles.append(module.register_forward_pre_hook(
                lambda m, a, s=s: (_fp8_round(a[0], s),)))
    if pred("model.transformer.ff_out.weight") and "head" in amax:
        s = 2 * amax["head"] / 448
        ln_f = pipe.transformer.model.transformer.ln_f
        handles.append(ln_f.register_forward_hook(lambda m, a, out, s=s: _fp8_round(out, s)))
    return handles


def head_input_amax(captions: list[str]) -> float:
    pipe = load_dimoo(nano_model_path(), dtype=torch.float32)
    seen = [0.0]
    pipe.transformer.model.transformer.ln_f.register_forward_hook(
        lambda m, a, out: seen.__setitem__(0, max(seen[0], float(out.abs().amax()))))
    logit_calls(pipe, captions)
    return seen[0]


def case(fmt: str, pred: Callable[[str], bool], captions: list[str], ref: list[torch.Tensor],
         amax: dict[str, float]) -> dict[str, float] | None:
    pipe = load_dimoo(nano_model_path(), dtype=torch.float32)
    if fmt == "A8":
        if not any(pred(n) for n, _ in pipe.transformer.named_parameters()
                   if not n.endswith("wte.weight") and "norm" not in n and "ln_f" not in n):
            return None
        input_hooks(pipe, pred, amax)
    else:
        with torch.no_grad():
            for name, p in pipe.transformer.named_parameters():
                if pred(name):
                    q = fake_quant(p.data, fmt)
                    if q is None:
                        return None
                    p.data.copy_(q)
    return logit_errors(ref, logit_calls(pipe, captions))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--logit-prompts", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "quant_layers.json"))
    a = ap.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    specs, _ = prompt_set("test", a.logit_prompts)
    captions = [scenes.caption_for(s) for s in specs]
    calib = [scenes.caption_for(s) for s in scenes.validation_specs(16)]
    amax = measure_input_ranges(nano_model_path(), calib)
    amax["head"] = head_input_amax(calib)
    ref = logit_calls(load_dimoo(nano_model_path(), dtype=torch.float32), captions)
    pipe = load_dimoo(nano_model_path(), dtype=torch.float32)
    rows: dict[str, dict[str, Any]] = {}
    for gname, pred in groups(pipe.config.n_layers).items():
        params = sum(p.numel() for n, p in pipe.transformer.named_parameters() if pred(n))
        rows[gname] = {"params": params}
        for fmt in FORMATS:
            rows[gname][fmt] = case(fmt, pred, captions, ref, amax)
        print(gname, json.dumps(rows[gname]), flush=True)
    lines = ["| group | params | " + " | ".join(FORMATS) + " |", "|" + "---|" * (2 + len(FORMATS))]
    for gname, r in rows.items():
        cells = [f"{r[f]['rel_error_mean']:.4f} ({100 * r[f]['argmax_agreement_mean']:.1f} %)"
                 if r[f] else "n/a" for f in FORMATS]
        lines.append(f"| {gname} | {r['params']} | " + " | ".join(cells) + " |")
    table = "\n".join(lines) + "\n"
    print(table)
    meta = {"logit_prompts": a.logit_prompts, "threads": a.threads,
            "command": "python -m benchmarks.experiments.quant_layers " + " ".join(
                sys.argv[1:] if argv is None else argv)}
    out = Path(a.json)
    out.write_text(json.dumps({"meta": meta, "groups": rows}, indent=1) + "\n")
    out.with_suffix(".md").write_text(table + f"\ncommand: `{meta['command']}`\n")
    print(f"wrote {out}")
    return rows


if __name__ == "__main__":
    main()
