"""Quantized weights vs fp32 on the shipped DiMOO-nano: logits error and GenEval-style quality.

    OMP_NUM_THREADS=1 nice -n 10 python -m lab.studies.quant_quality --prompts 98 \
        --json lab/results/quant_quality.json

Variants (compute float32 throughout; each built by the pack's own converter and loader):

* ``fp32``: the reference; ``fp8``: the pack's fp8 (per-output-channel scales, W8A16);
* ``comfy_fp8``: ComfyUI's format (per-tensor fp8, input scales calibrated on 16 validation
  captions x 3 masked fractions, margin 2) computed as ComfyUI's fast path does on fp8 GPUs
  (input quantized to fp8, W8A8, emulated exactly on the CPU); ``comfy_fp8_w8a16``: the same
  folder as ComfyUI runs it on GPUs without fp8 matmuls (weight dequantized);
* ``comfy_int8``: ComfyUI's int8_tensorwise, per-channel weight scales, every input row
  quantized on the fly (W8A8, as comfy-kitchen's int8_linear);
* ``Q8_0``, ``Q5_K_M``, ``Q4_K_M``: GGUF files (nano's 128-wide rows: K-quant super-blocks laid
  over the flattened block matrices, embedding and head Q8_0; see gguf_write.py).

Logits: the sampler's codebook logits (CFG applied) for the first ``--logit-prompts`` test
captions at masked fractions 1.0 / 0.5 / 0.1 (codes and masks from a fixed generator):
``||l - l_fp32|| / ||l_fp32||`` (mean, max) and the share of positions whose argmax agrees.
Quality: ``lab.studies.quality``'s test prompt set and ``generate`` for ``baseline-64`` and
``ladr-nano`` (seed of item i = TEST_IMAGE_SEED + i), scored by ``lab.nano.evaluator``; each
variant is compared with fp32 on the same prompts by a paired stratified bootstrap
(``lab.studies.paired_stats``, 95 %): "within the CI" = the interval of the difference holds 0.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lab.benchmarks.common import json_text, save_png
from lab.nano import scenes
from lab.nano.evaluator import score_images
from lab.studies.paired_stats import group_index, paired_bootstrap, scores
from lab.studies.quality import generate, prompt_set, strategy_table
from ladr_core import load_dimoo, nano_model_path
from ladr_core.dimoo.weights import quant

ROOT = Path(__file__).resolve().parents[2]
VARIANTS = ("fp32", "fp8", "comfy_fp8", "comfy_fp8_w8a16", "comfy_int8", "Q8_0", "Q5_K_M",
            "Q4_K_M")
QUALITY = ("fp32", "fp8", "comfy_fp8", "comfy_int8", "Q8_0", "Q5_K_M", "Q4_K_M")
STRATEGIES = ("baseline-64", "ladr-nano")
MASKED = (1.0, 0.5, 0.1)
MARGIN = 2.0


def build(name: str, work: Path, calibration: list[str]) -> Any:
    """The nano pipeline of variant ``name`` (float32 compute), converted into ``work``."""
    from ladr_core.dimoo.input_ranges import measure_input_ranges
    from ladr_core.dimoo.weights.convert import Conversion, convert_folder
    from ladr_core.dimoo.weights.gguf_write import write_gguf

    nano = Path(nano_model_path())
    if name == "fp32":
        return load_dimoo(nano, dtype=torch.float32)
    if name == "fp8":
        return load_dimoo(nano, dtype=torch.float32, weight_dtype="fp8_e4m3fn")
    if name.startswith("Q"):
        path = work / f"nano-{name}.gguf"
        if not path.exists():
            write_gguf(nano, path, name)
        return load_dimoo(path, dtype=torch.float32)
    fmt = "comfy_int8" if name == "comfy_int8" else "comfy_fp8_e4m3fn"
    folder = work / fmt
    if not folder.exists():
        conv = Conversion(fmt, torch.float32)
        if fmt != "comfy_int8":
            amax = measure_input_ranges(nano, calibration)
            conv.input_amax = {k: MARGIN * v for k, v in amax.items()}
        convert_folder(nano, folder, conv)
    pipe = load_dimoo(folder, dtype=torch.float32)
    for m in pipe.transformer.modules():
        if isinstance(m, quant.QuantLinear) and name.startswith("comfy_fp8"):
            m.quantize_input = name == "comfy_fp8"  # the fast path; w8a16: the emulated one
    return pipe


def logit_calls(pipe: Any, captions: list[str]) -> list[torch.Tensor]:
    """Codebook logits [1, N, K] of every (caption, masked fraction), fixed inputs."""
    out = []
    for i, caption in enumerate(captions):
        denoise = pipe.make_denoiser(caption, steps=64)
        n, k = denoise.layout.n_codes, pipe.ids.codebook_size
        for frac in MASKED:
            g = torch.Generator().manual_seed(1000 * i + int(frac * 100))
            tokens = torch.randint(0, k, (1, n), generator=g)
            masked = torch.rand(1, n, generator=g) < frac
            with torch.no_grad():
                out.append(denoise(tokens.masked_fill(masked, 0), masked).float())
    return out


def logit_errors(ref: list[torch.Tensor], got: list[torch.Tensor]) -> dict[str, float]:
    rel = [float((g - r).norm() / r.norm()) for r, g in zip(ref, got, strict=True)]
    agree = [float((g.argmax(-1) == r.argmax(-1)).float().mean())
             for r, g in zip(ref, got, strict=True)]
    return {"rel_error_mean": float(np.mean(rel)), "rel_error_max": max(rel),
            "argmax_agreement_mean": float(np.mean(agree)), "calls": len(rel)}


def weight_bytes(pipe: Any) -> int:
    return sum(t.numel() * t.element_size() for t in pipe.transformer.state_dict().values())


def quality_row(pipe: Any, captions: list[str], specs: list, seed0: int, args: dict[str, Any],
                batch: int) -> dict[str, Any]:
    run = generate(pipe, captions, seed0, args, pipe.default_cfg, 1.0, batch)
    passed = np.array(score_images(specs, list(run["images"]))["passed"], dtype=bool)
    return {"passed": passed.tolist(), "nfe_mean": float(run["nfe"].mean()),
            "wall_s": round(run["wall_s"], 1), "_images": run["images"]}


def compare(rows: dict[str, dict], gidx: np.ndarray) -> None:
    """Add score, per-group scores and the paired CI against fp32 to every quality row."""
    for name, row in rows.items():
        for strat, r in row.get("quality", {}).items():
            passed = np.array(r["passed"])
            sc = scores(passed, gidx)
            r["score_overall"], r["score"] = sc.pop("overall"), sc
            ref = rows["fp32"]["quality"].get(strat)
            if name != "fp32" and ref is not None:
                d = paired_bootstrap(passed, np.array(ref["passed"]), gidx)["overall"]
                r["diff_vs_fp32"] = d
                r["within_ci"] = bool(d["lo"] <= 0.0 <= d["hi"])


def markdown(rows: dict[str, dict], meta: dict[str, Any]) -> str:
    lines = ["| variant | weights (nano, KiB) | logits rel. err. mean / max | argmax agree | "
             + " | ".join(f"{s} overall | {s} - fp32 [95 % CI]" for s in STRATEGIES) + " |",
             "|" + "---|" * (4 + 2 * len(STRATEGIES))]
    for name, row in rows.items():
        lg = row.get("logits")
        cells = [name, f"{row['weight_bytes'] / 1024:.0f}",
                 f"{lg['rel_error_mean']:.4f} / {lg['rel_error_max']:.4f}" if lg else "-",
                 f"{100 * lg['argmax_agreement_mean']:.1f} %" if lg else "-"]
        for s in STRATEGIES:
            q = row.get("quality", {}).get(s)
            d = q.get("diff_vs_fp32") if q else None
            cells += [f"{q['score_overall']:.3f}" if q else "-",
                      f"{d['diff']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}]" if d else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"{meta['prompts']} test prompts, cfg {meta['cfg']}, {meta['threads']} "
              f"thread(s), compute float32; command: `{meta['command']}`"]
    return "\n".join(lines) + "\n"


def save_samples(rows: dict[str, dict], path: Path, n: int = 7) -> None:
    """PNG: the first ``n`` test prompts (columns) of baseline-64 for every quality variant
    (rows, in order), 3x nearest-neighbour upscaled."""
    from PIL import Image

    shown = [k for k, r in rows.items() if "baseline-64" in r.get("quality", {})]
    tiles = [np.concatenate(list(rows[k]["quality"]["baseline-64"]["_images"][:n]), axis=1)
             for k in shown]
    if tiles:
        arr = np.concatenate(tiles, axis=0)
        save_png(Image.fromarray(arr).resize((arr.shape[1] * 3, arr.shape[0] * 3),
                                             Image.NEAREST), path)
        path.with_suffix(".txt").write_text(
            f"baseline-64, the first {n} test prompts (columns); rows: {', '.join(shown)}\n")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--prompts", type=int, default=98, help="test prompts (14 per group)")
    ap.add_argument("--logit-prompts", type=int, default=16)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--quality-variants", default=",".join(QUALITY))
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    ap.add_argument("--batch", type=int, default=35)
    ap.add_argument("--threads", type=int, default=1, help="0 keeps torch's default")
    ap.add_argument("--json", default=str(ROOT / "lab" / "results" / "quant_quality.json"))
    a = ap.parse_args(argv)
    names, wanted = a.variants.split(","), set(a.quality_variants.split(","))
    if names[0] != "fp32" or any(n not in VARIANTS for n in names):
        ap.error(f"--variants: start with fp32, then any of {list(VARIANTS)}")
    if a.threads:
        torch.set_num_threads(a.threads)
    specs, seed0 = prompt_set("test", a.prompts)
    captions = [scenes.caption_for(s) for s in specs]
    gidx = group_index([scenes.group_of(s) for s in specs])
    calibration = [scenes.caption_for(s) for s in scenes.validation_specs(16)]
    table = strategy_table(64)
    rows: dict[str, dict[str, Any]] = {}
    ref: list[torch.Tensor] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            start = time.perf_counter()
            pipe = build(name, Path(tmp), calibration)
            row: dict[str, Any] = {"weight_bytes": weight_bytes(pipe)}
            calls = logit_calls(pipe, captions[:a.logit_prompts])
            if name == "fp32":
                ref = calls
            else:
                row["logits"] = logit_errors(ref, calls)
            if name in wanted:
                row["quality"] = {s: quality_row(pipe, captions, specs, seed0, table[s], a.batch)
                                  for s in a.strategies.split(",")}
            rows[name] = row
            compare({"fp32": rows["fp32"], name: row}, gidx)
            print(f"{name:18s} {json.dumps(_printable(row))} ({time.perf_counter() - start:.0f}s)",
                  flush=True)
    meta = {"prompts": a.prompts, "logit_prompts": a.logit_prompts, "masked": MASKED,
            "threads": a.threads, "cfg": float(load_dimoo(nano_model_path()).default_cfg),
            "calibration": "validation_specs(16) captions x masked 1.0/0.5/0.1, margin 2",
            "model": "dimoo_nano", "compute_dtype": "float32", "set": "test", "seed0": seed0,
            "command": "python -m lab.studies.quant_quality " + " ".join(
                sys.argv[1:] if argv is None else argv)}
    out = Path(a.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    save_samples(rows, out.with_name(out.stem + "_samples.png"))
    clean = {k: _printable(v, keep_passed=True) for k, v in rows.items()}
    out.write_text(json_text({"meta": meta, "variants": clean}))
    out.with_suffix(".md").write_text(markdown(rows, meta))
    print(markdown(rows, meta))
    print(f"wrote {out}")
    return clean


def _printable(row: dict[str, Any], keep_passed: bool = False) -> dict[str, Any]:
    out = {k: v for k, v in row.items() if k != "quality"}
    if "quality" in row:
        out["quality"] = {s: {k: v for k, v in q.items() if k != "_images" and
                              (keep_passed or k != "passed")} for s, q in row["quality"].items()}
    return out


if __name__ == "__main__":
    main()
