"""Every failure of a run, each with its section, case and error: what the exit status counts
and the JSON records under ``failures``.

A failure is a section that raised or was stopped (case None), or, inside a section, a check
that failed or raised: section a's cases, bf16 bounds, self-scores, sampler syncs, GPU tests and
checkpoints that raised; section b's layouts, VQ decode and compiled shapes that raised. What was
not run (not selected, not measured: budget, out of time, not applicable) and what is only
reported (a format that rounds on the GPU) is no failure.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["failures"]

#: what a failed check (no exception) says about itself, in this order
DETAILS = ("tokens_equal", "tokens_differ_share", "agreement", "item_nfe_cpu", "item_nfe_device",
           "err_device_bf16", "bound", "abs_diff", "syncs", "sampler_reads", "returncode",
           "counts", "tail")


def failures(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """[{"section", "case", "error"}] of run ``doc``, in the order the run made them."""
    out = []
    for key, entry in doc["sections"].items():
        if entry.get("status") == "error":
            out.append(_failure(key, None, entry))
            continue
        part = {"a": _section_a, "b": _section_b}.get(key)
        if part is not None:
            out += [_failure(key, case, row) for case, row in part(entry)]
    return out


def _failure(section: str, case: str | None, row: dict[str, Any]) -> dict[str, Any]:
    return {"section": section, "case": case, "error": _why(row)}


def _why(row: dict[str, Any]) -> str:
    """The error a row recorded; for a check that failed without one, what it measured."""
    if row.get("error"):
        return str(row["error"])
    details = ", ".join(f"{k}={str(row[k])[:200]}" for k in DETAILS if k in row)
    return "check failed" + (f": {details}" if details else "")


def _bad(row: dict[str, Any]) -> bool:
    return row.get("check") in ("failed", "error") or row.get("status") == "error"


def _section_a(a: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, model in a.get("models", {}).items():
        if model.get("status") == "error":
            yield name, model
        for row in model.get("cases", []):
            if _bad(row):
                yield f"{name}/{row['case']}", row
        for row in model.get("bf16_logits", []):
            if _bad(row):
                yield f"{name}/bf16_logits/{row['format']}", row
        if _bad(model.get("self_score", {})):
            yield f"{name}/self_score", model["self_score"]
    for row in a.get("sampler_syncs", []):
        if _bad(row):
            yield (f"sampler_syncs/{row['strategy']}/batch {row['batch']}/temperature "
                   f"{row['temperature']}"), row
    if _bad(a.get("gpu_tests", {})):
        yield "gpu_tests", a["gpu_tests"]


def _section_b(b: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for layout, row in b.get("layouts", {}).items():
        if _bad(row):
            yield f"layouts/{layout}", row
    if _bad(b.get("vq_decode", {})):
        yield "vq_decode", b["vq_decode"]
    compiled = b.get("compiled", {})
    if _bad(compiled):
        yield "compiled", compiled
    for shape, row in compiled.items():
        if isinstance(row, dict) and _bad(row):
            yield f"compiled/{shape}", row
