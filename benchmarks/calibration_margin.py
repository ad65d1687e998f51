"""Fit the calibration's non-inferiority margin on DiMOO-nano's VALIDATION set.

    OMP_NUM_THREADS=1 nice -n 10 python -m benchmarks.calibration_margin \
        --variant b2p2/guided --json benchmarks/results/calibration_margin.json

Inputs: the validation sweep of ``benchmarks.self_score_runs`` (final tokens and evaluator
verdicts of every setting, 210 prompts) and the per-token maps of
``benchmarks.self_score_probe``, aggregated as ``--variant`` (``benchmarks.self_score_variants``;
it must be the self-score the calibration reports). Method (``self_score_variants.fit``): over
the settings the evaluator does not score as broken (overall >= 0.35), the self-score
difference to baseline-64 against the evaluator's overall difference, a least-squares line
through the reference's (0, 0); the margin is that line's self-score difference at an evaluator
drop of 0.05, with a 95 % bootstrap interval (prompts resampled within their category, the fit
repeated). The spread is the sd of the per-prompt paired differences, the median over the
three settings the evaluator puts closest to baseline-64 (the spread grows with the loss, and a
calibration hopes to accept the near ones; the median over all is recorded too);
``prompts_needed`` the prompts at which a setting as good as the reference qualifies 4 times
out of 5 at that spread (``ladr_core.calibrate.margin``). ``ladr_core/calibrate/margin.py``
carries ``margin`` and ``spread`` (rounded) and cites this file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import write_result  # noqa: E402
from benchmarks.self_score_variants import load_set, variants  # noqa: E402
from ladr_core.calibrate.stats import paired_spread  # noqa: E402
from testbed import scenes  # noqa: E402
from testbed.paired_stats import group_index  # noqa: E402
from testbed.self_score_study import BASE, BROKEN, DROP, fit, margin_interval  # noqa: E402


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--variant", required=True, help="a name of self_score_variants.variants()")
    ap.add_argument("--prompts", type=int, default=210)
    ap.add_argument("--batch", type=int, default=35)
    ap.add_argument("--runs", default=str(ROOT / "benchmarks" / "results" / "self_score_runs"))
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "results"
                                          / "calibration_margin.json"))
    a = ap.parse_args(argv)
    maps, evaluator, gidx, runs = load_set(Path(a.runs), "validation", a.prompts, a.batch)
    agg, calls = variants()[a.variant]
    values = {s: agg(m) for s, m in maps.items()}
    f = fit(values, evaluator)
    passed = {s: r["passed"] for s, r in runs.items()}
    n = len(values[BASE])
    specs = scenes.validation_specs(n)
    strat = group_index([scenes.group_of(s) for s in specs])
    assert np.array_equal(strat, gidx)
    points = [{"setting": s, "evaluator_diff": evaluator[s]["diff"]["diff"],
               "evaluator_ci": [evaluator[s]["diff"]["lo"], evaluator[s]["diff"]["hi"]],
               "self_score_diff": float((values[s] - values[BASE]).mean()),
               "spread": paired_spread(values[s], values[BASE]),
               "nfe": evaluator[s]["nfe"]} for s in f["settings"]]
    payload = {
        "set": "validation", "prompts": n, "variant": a.variant,
        "self_score_calls_per_image": calls, "reference": BASE, "evaluator_drop": DROP,
        "broken_below": BROKEN, "method": "least squares through (0, 0) of the self-score "
        "difference on the evaluator difference, settings not broken; margin = slope x drop",
        "slope": f["slope"], "margin": f["margin"],
        "margin_ci95": margin_interval(values, passed, gidx, f["settings"]),
        "spread": f["spread"], "spread_nearest_settings": f["spread_nearest_settings"],
        "spread_all_median": f["spread_all_median"], "prompts_needed": f["prompts_needed"],
        "points": points, "worst_ladr_ratio": f["worst_ratio"], "ladr_ratios": f["ratios"],
        "command": "python -m benchmarks.calibration_margin " + " ".join(
            sys.argv[1:] if argv is None else argv)}
    path = write_result(Path(a.json).stem, payload, Path(a.json).parent)
    print(f"margin {f['margin']:.5f} {payload['margin_ci95']} slope {f['slope']:.4f} spread "
          f"{f['spread']:.4f} prompts needed {f['prompts_needed']}\nwrote {path}")
    return payload


if __name__ == "__main__":
    main()
