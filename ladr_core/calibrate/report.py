"""The calibration report: paired comparisons, the recommendation, a text table and a Pareto plot.

Recommendation rule (``RULE``, non-inferiority; why: docs/reports/CALIBRATION.md section 1): a
measured setting qualifies when ``noninferiority_lo``, the lower of the percentile bootstrap's
and Student's t (spread floored at ``margin.SPREAD_FLOOR``) lower ends of its paired 95 %
interval against the reference, is above ``-margin``; the qualifying one with the fewest
token-forwards per image is recommended (ties: the higher self-score); the reference always
qualifies. The plot is drawn with PIL (a runtime dependency), so it works in any ComfyUI.
"""

from __future__ import annotations

from typing import Any

from .candidates import strategy_spec
from .margin import (
    DEFAULT_MARGIN,
    SPREAD_FLOOR,
    lead_needed,
    margin_info,
    prompts_needed,
    shortfall_message,
)
from .stats import paired_mean_ci, paired_spread, paired_t_interval, pareto_front, t_interval

__all__ = ["RULE", "build_report", "decision_interval", "judge", "plot_report", "rejudge",
           "report_text", "why_recommended"]

RULE = ("non-inferiority: a setting qualifies when the lower end of its paired 95 % interval "
        "of the self-score difference to the reference is above -margin (it is shown to lose "
        "at most the margin; the lower end is the more cautious of the bootstrap and Student-t "
        "intervals, as the bootstrap's is too narrow on a few prompts, and Student's t never "
        "uses a spread below the one the margin was fitted with); among those, the fewest "
        "token-forwards per image, ties to the higher self-score; the reference always "
        "qualifies")


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def build_report(runs: dict[str, dict[str, Any]], groups: list[int], reference: str,
                 margin: float = DEFAULT_MARGIN, floor: float = SPREAD_FLOOR
                 ) -> dict[str, Any]:
    """``candidates`` (one entry per measured setting, run order), ``recommended``, ``why``,
    ``to_try``, ``warnings`` and the ``margin`` it was judged with (docs/reports/CALIBRATION.md)."""
    ref = runs[reference]["self_score"]
    out = []
    for name, r in runs.items():
        vs_ref = None if name == reference else paired_mean_ci(r["self_score"], ref, groups)
        spread = None if name == reference else paired_spread(r["self_score"], ref, groups)
        t_ref = None if name == reference else paired_t_interval(r["self_score"], ref, groups,
                                                                 min_sd=floor)
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
            "denoiser_calls": r.get("denoiser_calls"),
            "self_score": _mean(r["self_score"]),
            "components": {k: _mean(v) for k, v in r["scores"].items()},
            "vs_reference": vs_ref, "vs_matched": vs_matched,
            "below_reference": bool(vs_ref is not None and vs_ref["hi"] < 0),
            "vs_reference_t": t_ref, "spread": spread})
    front = pareto_front([c["token_forwards"] for c in out], [c["self_score"] for c in out])
    for i, c in enumerate(out):
        c["pareto"] = i in front
    prompts = len(set(groups))
    verdict = judge(out, reference, margin, prompts, len(groups) // max(1, prompts), floor)
    calls = [c["denoiser_calls"] for c in out]
    return {"reference": reference, "candidates": out, **verdict,
            "denoiser_calls": None if None in calls else sum(calls)}


def judge(cands: list[dict[str, Any]], reference: str, margin: float, prompts: int,
          seeds: int = 1, floor: float = SPREAD_FLOOR) -> dict[str, Any]:
    """Apply the rule (module docstring) to measured candidates, setting each one's
    ``noninferiority_lo``, ``qualifies`` and ``prompts_needed``: the report's recommendation
    fields. The prompt-shortfall warning comes only with the reference recommended."""
    for c in cands:
        boot, t = c.get("vs_reference"), c.get("vs_reference_t")
        low = None if boot is None else min(boot["lo"], t["lo"])
        c["noninferiority_lo"] = low
        c["qualifies"] = bool(low is None or low > -margin)
        c["prompts_needed"] = (None if c.get("spread") is None else
                               prompts_needed(max(c["spread"], floor), margin))
    best = min((c for c in cands if c["qualifies"]),
               key=lambda c: (c["token_forwards"], -c["self_score"]))
    ref_cost = next(c["token_forwards"] for c in cands if c["name"] == reference)
    to_try = [] if best["name"] != reference else sorted(
        (c for c in cands if c["token_forwards"] < ref_cost and not c["qualifies"]
         and c["vs_reference"]["diff"] > -margin), key=lambda c: c["token_forwards"])
    why, needed = why_recommended(cands, best, reference, margin, prompts, floor,
                                  [c["name"] for c in to_try])
    short = shortfall_message(prompts, seeds, margin, floor)
    info = margin_info(margin)
    info["spread_floor"] = floor
    return {"recommended": best["name"], "recommend_rule": RULE, "margin": info, "why": why,
            "prompts_needed": needed, "to_try": [c["name"] for c in to_try],
            "lead_needed": lead_needed(prompts, margin, floor),
            "warnings": [short] if short and best["name"] == reference else []}


def why_recommended(cands: list[dict[str, Any]], best: dict[str, Any], reference: str,
                    margin: float, prompts: int, floor: float = SPREAD_FLOOR,
                    to_try: list[str] | None = None) -> tuple[str, int | None]:
    """(why ``best`` was recommended, in words; the prompts a setting as good as the reference
    would need to qualify at the spread observed among the cheaper settings whose interval
    reaches above -margin (never below ``floor``), None when that does not apply)."""
    if best["name"] != reference:
        lo = best["noninferiority_lo"]
        text = (f"{best['name']} is the cheapest setting shown to lose at most the margin: the "
                f"lower end of its interval ({lo:+.4f}) is above -{margin:g}")
        need = prompts_needed(floor, margin)
        if prompts < need:
            text += (f"; on {prompts} prompts, fewer than the about {need} a setting as good "
                     f"as {reference} needs, it qualified because its self-score leads "
                     f"{reference}'s by {best['vs_reference']['diff']:+.4f}, more than the "
                     f"{lead_needed(prompts, margin, floor):+.4f} these prompts require")
        return text, None
    ref_cost = best["token_forwards"]
    cheaper = [c for c in cands if c["token_forwards"] < ref_cost]
    if not cheaper:
        return "no cheaper setting was measured", None
    worse = [c for c in cheaper if _upper(c) < -margin]
    open_ = [c for c in cheaper if _upper(c) >= -margin]
    if not open_:
        return (f"no cheaper setting qualifies: the self-score shows every one of the "
                f"{len(cheaper)} to lose more than the margin ({margin:g}) against {reference} "
                f"(the upper ends of their intervals are below -{margin:g}); more prompts "
                "would not change that"), None
    spreads = sorted(c["spread"] for c in open_)
    sd = max(spreads[len(spreads) // 2], floor)
    need = prompts_needed(sd, margin)
    shown = (f"{len(worse)} of the {len(cheaper)} cheaper settings are shown to lose more than "
             f"the margin ({margin:g}) against {reference}, and " if worse else "")
    tries = (f". Worth trying with more prompts (their mean self-score is within the margin "
             f"so far): {', '.join(to_try)}" if to_try else
             ". None of them is within the margin even by its mean")
    return (f"no cheaper setting qualifies on {prompts} prompts: {shown}the intervals of "
            f"{'the other' if worse else 'all'} {len(open_)} "
            f"({', '.join(c['name'] for c in open_)}) reach below -{margin:g}, so these prompts "
            f"cannot show that they lose at most the margin. At the spread of the per-prompt "
            f"differences seen here (sd {sd:.3g}, never below {floor:g}) a setting as good as "
            f"{reference} would need about {need} prompts to qualify{tries}"), need


def rejudge(report: dict[str, Any], floor: float = SPREAD_FLOOR) -> dict[str, Any]:
    """A report saved before the spread floor (its ``margin`` lacks ``spread_floor``) with its
    Student-t intervals recomputed from the stored means, spreads and counts, judged and its
    text rebuilt; a report made with the floor is returned unchanged."""
    if (report.get("margin") or {}).get("spread_floor") is not None:
        return report
    out = {**report, "candidates": [dict(c) for c in report["candidates"]]}
    for c in out["candidates"]:
        ci = c.get("vs_reference")
        c["vs_reference_t"] = None if ci is None else t_interval(
            ci["diff"], c.get("spread") or 0.0, ci["n"], floor)
    cond = report.get("conditions") or {}
    prompts = cond.get("prompts") or next(c["vs_reference"]["n"] for c in out["candidates"]
                                          if c.get("vs_reference"))
    margin = (report.get("margin") or {}).get("value", DEFAULT_MARGIN)
    verdict = judge(out["candidates"], report["reference"], margin, prompts,
                    cond.get("seeds", 1), floor)
    kept = [w for w in report.get("warnings", []) if not w.startswith("prompts: ")]
    out.update(verdict, warnings=verdict["warnings"] + kept, rejudged=True)
    out["text"] = report_text(out)
    return out


def _upper(c: dict[str, Any]) -> float:
    """The upper end of a setting's interval against the reference, the more cautious
    (higher) of the bootstrap's and Student's t (floored)."""
    t = c.get("vs_reference_t")
    return max(c["vs_reference"]["hi"], t["hi"] if t else c["vs_reference"]["hi"])


def decision_interval(c: dict[str, Any]) -> dict[str, float] | None:
    """The interval the rule reads: the mean difference, the lower end ``noninferiority_lo``
    and the more cautious upper end (None for the reference)."""
    if c.get("vs_reference") is None:
        return None
    return {"diff": c["vs_reference"]["diff"], "lo": c["noninferiority_lo"], "hi": _upper(c)}


def _ci(d: dict[str, Any] | None) -> str:
    return "-" if d is None else f"{d['diff']:+.4f} [{d['lo']:+.4f}, {d['hi']:+.4f}]"


def report_text(report: dict[str, Any]) -> str:
    """A fixed-width table of every setting ("ok": it qualifies; ``decision_interval``), then
    the recommendation, why, what to try with more prompts, the rule, margin and warnings."""
    head = (f"{'setting':16s} {'NFE':>6s} {'tok-fwd/img':>12s} {'s/img':>7s} {'self-score':>10s}"
            f"  {'vs ' + report['reference']:32s}  vs baseline at same NFE")
    lines = [head, "-" * len(head)]
    for c in report["candidates"]:
        m = c["vs_matched"]
        lines.append(f"{c['name']:16s} {c['nfe']:6.1f} {c['token_forwards']:12.0f} "
                     f"{c['seconds_per_image']:7.2f} {c['self_score']:+10.4f}  "
                     f"{_ci(decision_interval(c)):32s}  "
                     f"{'-' if m is None else m['name'] + ' ' + _ci(m)}"
                     f"{'  ok' if c.get('qualifies') else ''}")
    rec = next(c for c in report["candidates"] if c["name"] == report["recommended"])
    if rec["name"] == report["reference"]:
        lines += ["", f"recommended: {rec['name']} (the reference, {rec['nfe']:.1f} NFE)"]
    else:
        lines += ["", f"recommended: {rec['name']} ({rec['nfe']:.1f} NFE, "
                  f"{report['candidates'][0]['token_forwards'] / rec['token_forwards']:.2f}x "
                  f"fewer token-forwards than {report['reference']})"]
    if report.get("why"):
        lines.append(f"why: {report['why']}")
    if report.get("to_try"):
        lines.append(f"to try with more prompts: {', '.join(report['to_try'])}")
    lines.append(f"rule: {report['recommend_rule']}")
    m = report.get("margin")
    if m:
        lines.append(f"margin: {m['value']:g} ({m['source']})")
    lines += [f"warning: {w}" for w in report.get("warnings", [])]
    if report.get("sheet"):
        lines.append(f"contact sheet: {report['sheet']} (the same prompts and seeds under each "
                     "setting: judge the images; the sheet, not the self-score alone, is the "
                     "verdict)")
    if report.get("sheet_error"):
        lines.append(f"warning: {report['sheet_error']}")
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
    """PIL image: self-score difference to the reference (``decision_interval``) against
    token-forwards per image (log); baselines grey, candidates blue, the pick ringed."""
    import math

    from PIL import Image, ImageDraw

    w, h = size
    left, right, top, bottom = 80, 160, 40, 60
    img = Image.new("RGB", size, "white")
    d = ImageDraw.Draw(img)
    cands = report["candidates"]
    pts = [(c, decision_interval(c) or {"diff": 0.0, "lo": 0.0, "hi": 0.0}) for c in cands]
    xs = [math.log2(c["token_forwards"]) for c in cands]
    margin = (report.get("margin") or {}).get("value")
    ys = [v for _, ci in pts for v in (ci["lo"], ci["hi"])] + ([-margin] if margin else [])
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
    if margin:  # the non-inferiority line: a lower interval end above it qualifies
        _, my = px(x0, -margin)
        for sx in range(left, w - right, 12):
            d.line([sx, my, min(sx + 6, w - right), my], fill=(214, 39, 40))
        d.text((w - right + 4, my - 6), f"-margin {margin:g}", fill=(214, 39, 40))
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
