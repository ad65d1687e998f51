"""README's "Does it fit my card?" table from the run on the emulated cards
(lab/results/card_fit.json) beside the estimate (gpu_estimate.json): the one-image rows are the
run's, a cell where the estimate said otherwise is marked and explained in the results file
(``versus_estimate``); what the run does not cover (the streamed layout, the ML-Cache) stays
the estimate's, labelled so; the last row, seconds per image, is the roofline's estimate
(lab/results/roofline.json, lab/benchmarks/roofline/table.py) or a committed GPU run's. Rendered into README's ``gpu_estimate:begin readme`` block by
``python -m lab.benchmarks.gpu_estimate --docs``."""

from __future__ import annotations

import json
from typing import Any

from lab.benchmarks.common import RESULTS_DIR
from lab.benchmarks.layouts import GROUPS, SHORT, estimated_cell, fits
from lab.benchmarks.roofline.table import load as load_roofline
from lab.benchmarks.roofline.table import readme_row

__all__ = ["RESULTS", "load", "readme_table"]

RESULTS = RESULTS_DIR / "card_fit.json"
MARK = "†"


def load() -> dict[str, Any] | None:
    return json.loads(RESULTS.read_text()) if RESULTS.is_file() else None


def _cell(fit: dict[str, Any], est: dict[str, Any], card: str, px: int) -> str:
    names = []
    for group, members in GROUPS:
        run = [m for m in members if f"{card}/{m}/{px}" in fit["cases"]]
        if not run:  # not run on the card (streamed): the estimate's answer, said so
            gb = fit["cards"][card]["gb"]
            ok = [m for m in members if m in est["layouts"] and fits(est, m, f"{px}/1/none", gb)]
            names += [f"{group} (est.)"] if ok else []
            continue
        ok = [m for m in run if fit["cases"][f"{card}/{m}/{px}"]["fits"]]
        marked = [SHORT.get(m, m) + (MARK if f"{card}/{m}/{px}" in fit["versus_estimate"]
                                     else "") for m in ok]
        if ok == run and not any(f"{card}/{m}/{px}" in fit["versus_estimate"] for m in run):
            names.append(group)
        elif ok:
            names.append(" / ".join(marked))
    return ", ".join(names) or "-"


def readme_table(fit: dict[str, Any], est: dict[str, Any]) -> str:
    """The table at 1024 px (README holds four lines here; 512 px is in the results file)."""
    cards = [c for c, v in fit["cards"].items() if v["gb"] in est["cards_gb"]]
    head = " | ".join(f"{fit['cards'][c]['gb']} GB, sm "
                      f"{'.'.join(map(str, fit['cards'][c]['capability']))}" for c in cards)
    lines = [f"| **Does it fit my card?** Emulated, no GPU run yet: the node path on each card's "
             f"profile at commit {fit['env']['git_commit']} (`python -m lab.benchmarks.card_fit`,"
             " method: [docs/reports/GPU.md](docs/reports/GPU.md), CUDA emulation); (est.): "
             f"estimated, not run; {MARK}: the estimate said otherwise, why in "
             f"`lab/results/card_fit.json` | {head} |",
             "|---" * (len(cards) + 1) + "|",
             "| 1024 px, 1 image | " + " | ".join(_cell(fit, est, c, 1024) for c in cards) + " |"]
    if any(k.endswith("/1024/1/ml-cache") for k in est["cards"]):
        lines.append("| 1024 px, + ML-Cache (est.) | " + " | ".join(
            estimated_cell(est, "1024/1/ml-cache", fit["cards"][c]["gb"]) for c in cards) + " |")
    roof = load_roofline()
    if roof is not None and all(c in roof["cards"] for c in cards):
        lines.append(readme_row(roof, cards))
    return "\n".join(lines)
