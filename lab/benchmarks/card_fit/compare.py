"""Where the run on the emulated card disagrees with gpu_estimate's estimate
(lab/results/gpu_estimate.json, its ``cards``: the node path's peak reserved bytes on an 80 GB
emulation, a card of N GB taken to fit when that peak leaves 1 GiB of headroom), and why, from
the two runs' own figures: the estimate's peak against the card's capacity less its context
(0.5 GiB in the profiles, 1 GiB of headroom in the estimate), the attention backend the card
takes (the estimate assumes flash everywhere), and the phase that ran out."""

from __future__ import annotations

import json
from typing import Any

from lab.benchmarks.common import RESULTS_DIR

__all__ = ["ESTIMATE", "compare", "estimated_fit"]

ESTIMATE = RESULTS_DIR / "gpu_estimate.json"
GIB = 2 ** 30


def _estimate() -> dict[str, Any]:
    return json.loads(ESTIMATE.read_text())["cards"] if ESTIMATE.is_file() else {}


def estimated_fit(estimate: dict[str, Any], layout: str, px: int, gb: int) -> bool | None:
    """The estimate's answer for one image without a cache (None: not estimated)."""
    row = estimate.get(f"{layout}/{px}/1/none")
    if row is None:
        return None
    return row["card_gb"] is not None and row["card_gb"] <= gb


def _why(case: dict[str, Any], row: dict[str, Any], card: dict[str, Any]) -> str:
    capacity = (card["gb"] * GIB - card["context_bytes"]) / GIB
    parts = [f"estimated peak {row['peak_reserved'] / GIB:.2f} GiB reserved against "
             f"{card['gb'] - 1} GiB (1 GiB headroom); the card gives the allocator "
             f"{capacity:.2f} GiB"]
    if case["fits"]:
        parts.append(f"the run peaked at {case['peak_reserved'] / GIB:.2f} GiB")
    else:
        parts.append(f"the run ran out in {case['failed']}: {case['oom']}")
    if case["attention"] and case["attention"] != ["flash"]:
        parts.append(f"attention ran as {', '.join(case['attention'])} on this card, not flash")
    return "; ".join(parts)


def compare(doc: dict[str, Any]) -> dict[str, str]:
    """case key -> why the run and the estimate disagree, for each case where they do."""
    estimate, out = _estimate(), {}
    for key, case in doc["cases"].items():
        name, layout, px = key.split("/")
        card = doc["cards"][name]
        said = estimated_fit(estimate, layout, int(px), card["gb"])
        if said is not None and said != case["fits"]:
            out[key] = (f"estimated {'fits' if said else 'does not fit'}, run "
                        f"{'fits' if case['fits'] else 'does not fit'}: "
                        + _why(case, estimate[f"{layout}/{px}/1/none"], card))
    return out
