"""The roofline's figures in the documents, from lab/results/roofline.json alone: one row of
README's card table (lab/benchmarks/card_fit/table.py) and the "Time per card" section of
docs/reports/GPU.md, both written by ``python -m lab.benchmarks.gpu_estimate --docs``.

Where a GPU run of gpu_check is committed for a card (``gpu_check_<device>.json`` under
lab/results, not a smoke run, its ``device_name`` the card's name), README's cell gives that
run's measured seconds per image instead, labelled so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lab.benchmarks.common import RESULTS_DIR
from lab.benchmarks.layouts import LAYOUT_NAMES

from .explain import card_table, check_text, method_text

__all__ = ["README_LABELS", "RESULTS", "gpu_section", "load", "measured", "readme_row"]

RESULTS = RESULTS_DIR / "roofline.json"
#: README's strategies: the official sampler and the default LADR preset
README_LABELS = ("baseline-64", "ladr-nano")
README_PX = 1024


def load(path: Path = RESULTS) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.is_file() else None


def measured(label: str, folder: Path = RESULTS_DIR) -> dict[str, Any] | None:
    """The committed gpu_check run on the card named ``label`` (its newest), or None."""
    runs = []
    for path in sorted(folder.glob("gpu_check_*.json")):
        doc = json.loads(path.read_text())
        if not doc.get("smoke") and doc.get("device_name") == label:
            runs.append((doc.get("env", {}).get("utc", ""), path.name, doc))
    return max(runs, key=lambda r: r[:2])[2] if runs else None


def _from_gpu_check(run: dict[str, Any]) -> str | None:
    rows = {r["case"]: r for r in run.get("sections", {}).get("c", {}).get("per_image", [])}
    if not all(label in rows for label in README_LABELS):
        return None
    said = " / ".join(f"{rows[label]['seconds_per_image']:.1f}" for label in README_LABELS)
    return f"{said} s (bf16, measured: gpu_check)"


def _fastest(roof: dict[str, Any], card: str, px: int) -> tuple[str, dict[str, Any]] | None:
    """The layout whose baseline-64 image is quickest among those that fit ``card``."""
    done = [(layout, roof["cases"][f"{card}/{layout}/{px}"]) for layout in roof["layouts"]
            if "per_image_s" in roof["cases"].get(f"{card}/{layout}/{px}", {})]
    return min(done, key=lambda d: d[1]["per_image_s"][README_LABELS[0]], default=None)


def cell(roof: dict[str, Any], card: str, folder: Path = RESULTS_DIR) -> str:
    """README's cell for ``card``: gpu_check's measurement, else the roofline's estimate."""
    run = measured(roof["cards"][card]["label"], folder)
    found = _from_gpu_check(run) if run is not None else None
    if found is not None:
        return found
    best = _fastest(roof, card, README_PX)
    if best is None:
        return "- (no layout fits)"

    layout, case = best
    said = " / ".join(f"{case['per_image_s'][label]:.1f}" for label in README_LABELS)
    return f"{said} s ({LAYOUT_NAMES[layout]})"


def readme_row(roof: dict[str, Any], cards: list[str], folder: Path = RESULTS_DIR) -> str:
    """One row of README's card table, one cell per card of ``cards``."""
    title = (f"{README_PX} px, seconds per image, {' / '.join(README_LABELS)}: estimated "
             "(roofline), fastest layout that fits")
    return f"| {title} | " + " | ".join(cell(roof, c, folder) for c in cards) + " |"


def gpu_section(roof: dict[str, Any]) -> str:
    """GPU.md's "Time per card" section (method, per-card table, the H100 check)."""
    return "\n\n".join([method_text(roof), card_table(roof), check_text(roof)]) + "\n"
