"""The text of each generated block (docs.py), from a gpu_check run or, without one, pending.

Every projected figure goes through projection.projected_seconds; every other number is read
from the run's JSON (or, for the older figures, from the file they were committed in).
"""

from __future__ import annotations

import json
from typing import Any

from lab.benchmarks.common import RESULTS_DIR

from . import render_figures
from .budget import COMPILE_8B_S, PRIOR_S

__all__ = ["COMMAND", "block"]

COMMAND = "python -m lab.benchmarks.gpu_check"
OLDER = RESULTS_DIR / "gpu_nvidia_h100_80gb_hbm3.json"
#: what changed in the code since the older H100 figures were measured
CHANGED = ("per-item ML-Cache state, the three CFG rows, the in-place MLP, rolling batches, "
           "painting, editing, the ComfyUI quant format and GGUF")
WHAT = {"a": "correctness on the GPU against the CPU in float32",
        "b": "ms per call and peak memory per weight layout",
        "c": "seconds per image; rolling batches", "d": "a calibration's cost"}


def _older() -> dict[str, Any]:
    doc = json.loads(OLDER.read_text())
    return {"doc": doc, "commit": doc["env"]["git_commit"], "file": "lab/results/"
            + OLDER.name, "label": f"measured on commit {doc['env']['git_commit']}, code older "
            f"than {CHANGED}"}


def _pending(section: str) -> str:
    return (f"**Pending.** No GPU run of `{COMMAND}` is committed yet; its section {section} "
            f"measures this. ")


def block(name: str, doc: dict[str, Any] | None, where: str | None) -> str:
    """The text of block ``name`` from run ``doc`` (committed at ``where``), or pending."""
    fn = {"plan": _plan, "status": _status, "correctness": _correctness, "speed": _speed,
          "per_image": _per_image, "calibration": _calibration, "older": _older_block,
          "usage-memory": _usage_memory, "self-score-calibration": _self_score,
          "readme": _readme}[name]
    return fn(doc, where)


def _sec(doc: dict[str, Any] | None, key: str) -> dict[str, Any] | None:
    if doc is None:
        return None
    entry = doc["sections"].get(key, {})
    return entry if entry.get("status") == "measured" else None


# ---------------------------------------------------------------------------------- the run
def _plan(doc: dict[str, Any] | None, where: str | None) -> str:
    prior = PRIOR_S["cuda"]
    rows = ["| section | what | estimated on one H100 | this run |", "|---|---|---|---|"]
    for key in "abcd":
        entry = (doc or {}).get("sections", {}).get(key, {})
        ran = (f"{entry['seconds'] / 60:.1f} min" if "seconds" in entry
               else entry.get("status", "pending"))
        rows.append(f"| {key} | {WHAT[key]} | {prior[key] / 60:.1f} min | {ran} |")
    total = sum(prior.values()) / 60
    done = f"{doc['seconds'] / 60:.1f} min" if doc else "pending"
    rows.append(f"| | all, the probe and model builds included | **{total:.1f} min** "
                f"(estimated) | {done} |")
    return ("\n".join(rows) + "\n\nThe estimates are `PRIOR_S` in lab/benchmarks/gpu_check/budget.py, "
            "written before any run (labelled estimated until a run replaces them). Last, after "
            "section d, section b compiles the bf16 passes shape by shape, about "
            f"{COMPILE_8B_S['cuda']:.0f} s each (assumed), in the time the budget has left.\n")


def _status(doc: dict[str, Any] | None, where: str | None) -> str:
    if doc is None:
        return (f"**Pending.** No GPU run of `{COMMAND}` is committed yet: every figure in "
                "Secs. 2-5 is pending, and the figures in Sec. 6 were measured on code older "
                f"than {CHANGED}.\n")
    parts = [f"`{where}`: {doc['device_name']}, driver {doc.get('driver') or '?'}, torch "
             f"{doc['torch']} (CUDA {doc.get('cuda')}), commit {doc.get('commit') or '?'}, "
             f"{doc['seconds'] / 60:.1f} min of a {doc['budget_s'] / 60:.0f}-minute budget."]
    skipped = [f"{k} ({v['status']})" for k, v in doc["sections"].items()
               if v.get("status") != "measured"]
    if skipped:
        parts.append("Not measured: " + "; ".join(skipped) + ".")
    return " ".join(parts) + "\n"


# ------------------------------------------------------------------------------ section a
def _correctness(doc: dict[str, Any] | None, where: str | None) -> str:
    a = _sec(doc, "a")
    if a is None:
        from ladr_core import preset_names, strategy_names

        from .cases import FORMATS

        return (_pending("a") + "On DiMOO-nano and the tiny random checkpoint, each against "
                "the CPU in float32, greedy, the same stored weights: text to image with every "
                f"registered strategy ({', '.join(strategy_names())}) and LADR preset "
                f"({', '.join(preset_names())}); ML-Cache `official` and `ladr`; inpaint, "
                "outpaint, edit (the tiny checkpoint: nano cannot edit); a rolling batch (2 of 4 "
                "in flight; its agreement with each item alone on the device); every weight "
                f"format ({', '.join(FORMATS)}) in float32, and in bf16 "
                "against the bound of Sec. 2.1; block streaming; `pipe.compile()`; the "
                "self-score; host syncs per step counted by CUDA; the sampler alone under every "
                "strategy and preset; tests/core/test_gpu.py.\n")
    models = [m for m, v in a["models"].items() if v.get("status") == "measured"]
    s = a["summary"]
    out = [f"{s['passed']} checks passed, {s['failed']} failed, {s['error']} raised "
           f"(`{where}`, section a).", "",
           "| case | " + " | ".join(models) + " |", "|---|" + "---|" * len(models)]
    names = [r["case"] for r in a["models"][models[0]]["cases"]] if models else []
    for name in names:
        cells = [_case_cell(next(r for r in a["models"][m]["cases"] if r["case"] == name))
                 for m in models]
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    out += ["", "bf16, teacher-forced logits against the CPU in float32 (max |difference|; "
            "bound 2x the CPU's own bf16 rounding, Sec. 2.1):", "",
            "| format | " + " | ".join(models) + " |", "|---|" + "---|" * len(models)]
    formats = [r["format"] for r in a["models"][models[0]]["bf16_logits"]] if models else []
    for fmt in formats:
        cells = [_bound_cell(next(r for r in a["models"][m]["bf16_logits"]
                                  if r["format"] == fmt)) for m in models]
        out.append(f"| {fmt} | " + " | ".join(cells) + " |")
    for m in models:
        ss = a["models"][m]["self_score"]
        out.append(f"\nSelf-score ({m}): |device - CPU| = {ss.get('abs_diff', 0):.2e} against "
                   f"the bound {ss.get('bound', 0):.2e}: {ss['check']}.")
    for m, v in a["models"].items():
        if v.get("status") != "measured":
            out.append(f"\n{m}: {v.get('status')} {v.get('error', '')}".rstrip() + ".")
    sampler = a["sampler_syncs"]
    ok = sum(r["check"] == "passed" for r in sampler)
    out.append(f"\nThe sampler alone (fake denoiser): {ok} of {len(sampler)} runs with at most "
               f"one host sync per step. tests/core/test_gpu.py: {a['gpu_tests'].get('counts')} "
               f"({a['gpu_tests']['check']}).")
    return "\n".join(out) + "\n"


def _case_cell(r: dict[str, Any]) -> str:
    if r["check"] == "not applicable":
        return "n/a"
    if r["check"] == "error":
        return f"**raised** {r.get('error', '')[:80]}"
    equal = "equal" if r.get("tokens_equal") else (
        f"**differ** ({100 * r.get('tokens_differ_share', 1):.1f} %)")
    if r["check"] == "reported":
        why = "batch kernels" if "items" in r else "fp8 matmul sums, bounded"
        equal = f"differ ({100 * r.get('tokens_differ_share', 1):.1f} %; {why})"
    if "items" in r:
        equal += f"; {r['items_agree']} of {r['items']} items as alone on the device"
    return f"{equal}, {r['syncs_per_step']:.2f} syncs/step ({r['beyond_sampler_reads']:+d})"


def _bound_cell(r: dict[str, Any]) -> str:
    if r["check"] == "error":
        return f"**raised** {r.get('error', '')[:80]}"
    return f"{r['err_device_bf16']:.3g} <= {r['bound']:.3g}: {r['check']}"


# ---------------------------------------------------------------------- sections b, c, d
def _speed(doc: dict[str, Any] | None, where: str | None) -> str:
    return render_figures.speed(_sec(doc, "b"), where, _pending("b"), _older())


def _per_image(doc: dict[str, Any] | None, where: str | None) -> str:
    from .per_image import nano_nfe

    return render_figures.per_image(_sec(doc, "c"), where, _pending("c"), nano_nfe())


def _calibration(doc: dict[str, Any] | None, where: str | None) -> str:
    from .calibration import calls_per_image

    return render_figures.calibration(_sec(doc, "d"), where, _pending("d"), calls_per_image())


def _older_block(doc: dict[str, Any] | None, where: str | None) -> str:
    from .per_image import nano_nfe

    return render_figures.older_block(_older(), nano_nfe())


def _usage_memory(doc: dict[str, Any] | None, where: str | None) -> str:
    return render_figures.usage_memory(_sec(doc, "b"), where, _older())


def _self_score(doc: dict[str, Any] | None, where: str | None) -> str:
    from .calibration import calls_per_image

    return render_figures.self_score(_sec(doc, "d"), where, calls_per_image())


def _readme(doc: dict[str, Any] | None, where: str | None) -> str:
    return render_figures.readme(_sec(doc, "c"), where)
