"""The calibration report: paired comparisons, the recommendation, a text table and a Pareto plot.

Recommendation rule (``RULE``): among every measured setting (the reference, the candidates and
the baselines at their NFE), those whose self-score is not measurably below the reference
(the paired 95 % interval of the difference reaches 0 or above) qualify; the one with the
fewest token-forwards per image is recommended (ties: the higher self-score). The reference
always qualifies, so there is always a recommendation.

The plot is drawn with PIL (a runtime dependency), so it works in any ComfyUI install.
"""

from __future__ import annotations

from typing import Any

from .candidates import strategy_spec
from .stats import paired_mean_ci, pareto_front

__all__ = ["RULE", "build_report", "plot_report", "report_text"]

RULE = ("fewest token-forwards per image among the settings whose self-score is not measurably "
        "below the reference (paired 95 % bootstrap interval of the difference reaching 0 or "
        "above); ties go to the higher self-score")


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def build_report(runs: dict[str, dict[str, Any]], groups: list[int], reference: str
                 ) -> dict[str, Any]:
    """``candidates`` (one entry per measured setting, run order) and ``recommended``."""
    ref = runs[reference]["self_score"]
    out = []
    for name, r in runs.items():
        vs_ref = None if name == reference else paired_mean_ci(r["self_score"], ref, groups)
        matched = r.get("matched")
        vs_matched = None
        if matched in runs and matched != name:
            vs_matched = {"name": matched, **paired_mean_ci(r["self_score"],
                                                            runs[matched]["self_score"], groups)}
        n = len(r["nfe"])
        out.append({
            "name": name, "role": r["candidate"].role,
            "strategy": strategy_spec(r["candidate"]),
            "nfe": r["nfe_mean"], "token_forwards": _mean(r["token_forwards"]),
            "wall_s": r["seconds"], "seconds_per_image": r["seconds"] / n,
            # an item rides along until its batch finishes: denoiser calls x batch rows / image
            "batch_calls_per_image": r["row_calls"] / n,
            "self_score_seconds": r["score_seconds"],
            "self_score": _mean(r["self_score"]),
            "components": {k: _mean(v) for k, v in r["scores"].items()},
            "vs_reference": vs_ref, "vs_matched": vs_matched,
            "below_reference": bool(vs_ref is not None and vs_ref["hi"] < 0)})
    ok = [c for c in out if not c["below_reference"]]
    best = min(ok, key=lambda c: (c["token_forwards"], -c["self_score"]))
    front = pareto_front([c["token_forwards"] for c in out], [c["self_score"] for c in out])
    for i, c in enumerate(out):
        c["pareto"] = i in front
    return {"reference": reference, "candidates": out, "recommended": best["name"],
            "recommend_rule": RULE}


def _ci(d: dict[str, Any] | None) -> str:
    return "-" if d is None else f"{d['diff']:+.4f} [{d['lo']:+.4f}, {d['hi']:+.4f}]"


def report_text(report: dict[str, Any]) -> str:
    """A fixed-width table of every setting, then the recommendation and its rule."""
    head = (f"{'setting':16s} {'NFE':>6s} {'tok-fwd/img':>12s} {'s/img':>7s} {'self-score':>10s}"
            f"  {'vs ' + report['reference']:32s}  vs baseline at same NFE")
    lines = [head, "-" * len(head)]
    for c in report["candidates"]:
        m = c["vs_matched"]
        lines.append(f"{c['name']:16s} {c['nfe']:6.1f} {c['token_forwards']:12.0f} "
                     f"{c['seconds_per_image']:7.2f} {c['self_score']:+10.4f}  "
                     f"{_ci(c['vs_reference']):32s}  "
                     f"{'-' if m is None else m['name'] + ' ' + _ci(m)}"
                     f"{'  BELOW' if c['below_reference'] else ''}")
    rec = next(c for c in report["candidates"] if c["name"] == report["recommended"])
    lines += ["", f"recommended: {rec['name']} ({rec['nfe']:.1f} NFE, "
              f"{report['candidates'][0]['token_forwards'] / rec['token_forwards']:.2f}x fewer "
              f"token-forwards than {report['reference']})", f"rule: {report['recommend_rule']}"]
    for s in report.get("skipped", []):
        lines.append(f"not run ({s['reason']}): {s['name']}")
    return "\n".join(lines) + "\n"


def _count(v: float) -> str:
    """1234 -> '1.2k', 538000 -> '538k', 3.1e6 -> '3.1M'."""
    if v >= 1e6:
        return f"{v / 1e6:.1f}M"
    if v >= 1e4:
        return f"{v / 1e3:.0f}k"
    return f"{v / 1e3:.1f}k" if v >= 1e3 else f"{v:.0f}"


def plot_report(report: dict[str, Any], size: tuple[int, int] = (900, 560)) -> Any:
    """PIL image: self-score difference to the reference (95 % intervals) against token-forwards
    per image (log scale); baselines grey, LADR candidates blue, the recommendation ringed."""
    import math

    from PIL import Image, ImageDraw

    w, h = size
    left, right, top, bottom = 80, 160, 40, 60
    img = Image.new("RGB", size, "white")
    d = ImageDraw.Draw(img)
    cands = report["candidates"]
    pts = [(c, c["vs_reference"] or {"diff": 0.0, "lo": 0.0, "hi": 0.0}) for c in cands]
    xs = [math.log2(c["token_forwards"]) for c in cands]
    ys = [v for _, ci in pts for v in (ci["lo"], ci["hi"])]
    x0, x1 = min(xs) - 0.2, max(xs) + 0.2
    y0, y1 = min(ys + [0.0]), max(ys + [0.0])
    pad = (y1 - y0) * 0.08 or 1e-3
    y0, y1 = y0 - pad, y1 + pad

    def px(x: float, y: float) -> tuple[float, float]:
        return (left + (x - x0) / (x1 - x0) * (w - left - right),
                top + (y1 - y) / (y1 - y0) * (h - top - bottom))

    d.rectangle([left, top, w - right, h - bottom], outline="black")
    zx, zy = px(x0, 0.0)
    d.line([left, zy, w - right, zy], fill=(160, 160, 160))
    for k in range(math.ceil(x0 * 2), math.floor(x1 * 2) + 1):  # ticks at powers of sqrt(2)
        tx, _ = px(k / 2, y0)
        d.line([tx, h - bottom, tx, h - bottom + 5], fill="black")
        d.text((tx - 12, h - bottom + 8), _count(2 ** (k / 2)), fill="black")
    for frac in (0.0, 0.5, 1.0):
        v = y0 + (y1 - y0) * frac
        _, ty = px(x0, v)
        d.text((4, ty - 6), f"{v:+.3f}", fill="black")
    for (c, ci), x in zip(pts, xs, strict=True):
        color = (120, 120, 120) if c["strategy"]["kind"] == "baseline" else (31, 119, 180)
        (cx, lo), (_, hi), (_, cy) = px(x, ci["lo"]), px(x, ci["hi"]), px(x, ci["diff"])
        d.line([cx, lo, cx, hi], fill=color, width=2)
        d.ellipse([cx - 4, cy - 4, cx + 4, cy + 4], fill=color)
        if c["name"] == report["recommended"]:
            d.ellipse([cx - 9, cy - 9, cx + 9, cy + 9], outline=(214, 39, 40), width=2)
        d.text((cx + 6, cy - 12), f"{c['name']} ({c['nfe']:.1f} NFE)", fill=color)
    d.text((left, 10), f"self-score minus {report['reference']} (95 % CI) vs token-forwards per "
           f"image; recommended: {report['recommended']}", fill="black")
    d.text((left + 200, h - 22), "token-forwards per image (log scale)", fill="black")
    return img
