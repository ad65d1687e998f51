"""The prose and tables of GPU.md's "Time per card" section; every number from roofline.json."""

from __future__ import annotations

from typing import Any

from lab.benchmarks.layouts import LAYOUT_NAMES

__all__ = ["card_table", "check_text", "method_text"]


def method_text(roof: dict[str, Any]) -> str:
    env = roof["env"]
    return (
        f"**Estimated (roofline), not measured.** `python -m lab.benchmarks.roofline` wrote "
        f"`lab/results/roofline.json` on commit {env['git_commit']} ({roof['device']}). "
        "gpu_check's measured seconds per image replace a card's figures in README once a GPU "
        "run of that card is committed.\n\n"
        "**Method.** The 8B shape at full width and depth with shape-only weights, as "
        "`card_fit` runs it, on each emulated card's profile (its kernel rules: fp8 falls back "
        "to a float matmul on a card without fp8, attention takes the card's backend), one "
        "1024 or 512 px image with its CFG rows packed into one pass: every kernel of one full "
        "denoiser call (a step) and of the first step (prompt rows, first call, the sampler's "
        "decision) is recorded with its FLOPs (torch's FLOP formulas: matrix products and "
        "attention) and the bytes it reads and writes (lab/benchmarks/roofline/ops.py). Each "
        "kernel costs max(FLOPs / the card's dense tensor-core peak for its operand kind, bytes "
        "/ the card's memory bandwidth) plus one launch; the peaks and bandwidths are "
        "spec-sheet values, the launch cost the project's one launch-bound H100 figure "
        "(sources in tests/kit/cuda_emu/cards.py), none fitted to a measurement. An image is the "
        "first step plus (forwards - 1) calls, at each strategy's mean forwards on "
        "DiMOO-nano's test set (lab/results/quality_test.json); the VQ decode and the "
        "sampler's kernels after the first step are not counted. Only the cases card_fit "
        "says fit are priced.")


def _s(x: float) -> str:
    return f"{x * 1e3:.0f} ms" if x < 1 else f"{x:.1f} s"


def card_table(roof: dict[str, Any]) -> str:

    labels = list(roof["strategies"])
    sizes = roof["sizes"]
    both = " / ".join(f"{px}" for px in sizes)
    head = ([f"step, {px} px" for px in sizes]
            + [f"`{label}` ({roof['strategies'][label]['nfe_mean']:.1f} forwards), {both} px"
               for label in labels])
    lines = ["| card | layout | " + " | ".join(head) + " |", "|---" * (len(head) + 2) + "|"]
    for card, spec in roof["cards"].items():
        for layout in roof["layouts"]:
            cases = [roof["cases"].get(f"{card}/{layout}/{px}", {}) for px in sizes]
            if not any("step" in c for c in cases):
                continue
            steps = [_s(c["step"]["seconds"]) if "step" in c else "does not fit" for c in cases]
            images = [" / ".join(_s(c["per_image_s"][label]) if "per_image_s" in c else "-"
                                 for c in cases) for label in labels]
            lines.append(f"| {spec['gb']} GB, sm {'.'.join(map(str, spec['capability']))} "
                         f"({card}) | {LAYOUT_NAMES[layout]} | " + " | ".join(steps + images)
                         + " |")
    none = [c for c in roof["cards"] if not any(
        "step" in roof["cases"].get(f"{c}/{lay}/{px}", {}) for lay in roof["layouts"]
        for px in sizes)]
    if none:
        lines.append("")
        lines.append(f"Not priced: {', '.join(none)}, where card_fit fits no layout.")
    return "\n".join(lines)


def check_text(roof: dict[str, Any]) -> str:
    chk = roof.get("check") or {}
    if not chk:
        return "No H100 check in this run (it needs the h100 card and the bf16 layout)."
    step = chk["step"]
    lines = [f"**Against the one GPU measurement** ({chk['gpu']}, torch {chk['torch']}, "
             f"commit {chk['commit']}, `{chk['file']}`), with the prompt lengthened to that "
             f"run's {chk['real_tokens']} real tokens:", "",
             "| figure | measured | estimated (roofline) | estimated / measured |",
             "|---|---|---|---|"]
    lines += [f"| {r['figure']} | {_s(r['measured_s'])} | {_s(r['estimated_s'])} | "
              f"{r['ratio']:.2f} |" for r in chk["rows"]]
    measured = chk["rows"][0]["measured_s"]
    lines += ["", (
        f"The ratio is reported as found. The call's {step['kernels']} kernels carry "
        f"{step['flops'] / 1e12:.1f} TFLOP and {step['nbytes'] / 2 ** 30:.0f} GiB of reads and "
        f"writes: at the spec peaks the FLOPs alone take {_s(step['compute_s'])} and the bytes "
        f"alone {_s(step['memory_s'])}; the larger of the two per kernel sums to "
        f"{_s(step['bound_s'])} ({step['bound_s'] / measured:.2f} of the measurement) and the "
        f"launches add {_s(step['launch_s'])}. Why the estimate and the card differ: the "
        f"measured call ran at {chk['measured_tflops']:.0f} TFLOPS, "
        f"{chk['measured_tflops'] * 1e12 / chk['bf16_peak']:.0%} of the dense bf16 peak the "
        "roofline grants every matrix product, and no kernel is granted less than the full "
        "memory bandwidth either; the launch cost is a host figure charged in "
        "series, while an eager run's host partly runs ahead of long kernels (so it can "
        "over-count as the peaks under-count); and the measured code is older (before the "
        "three CFG rows, the in-place MLP and the per-item ML-Cache) than the traced code. "
        "No committed results file holds a compiled call's time, so the roofline is checked "
        "against eager figures only.")]
    return "\n".join(lines)
