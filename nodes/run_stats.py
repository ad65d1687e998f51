"""The sampler's and DiMOO Edit's stats line (docs/ARCHITECTURE.md section 7): steps run of those
planned, forward passes against the official sampler's on the same schedule, strength and tokens
(``ladr_core.official_passes``: the price no rule exceeds) and the ML-Cache's share recomputed.
``work_fields`` adds the numbers to the stats dict (keys added, never renamed: saved analyses
read them); ``stats_text`` writes the line of the STRING output.
"""

from __future__ import annotations

from typing import Any

from ladr_core import DEFAULT_STEPS, StepSchedule, official_passes

OFFICIAL = "baseline"
PLANNED = StepSchedule()  # a result reported without its schedule: DiMOO's 64 steps


def tokens_generated(result: Any) -> list[int]:
    """Tokens each image generated: its painted region's, else its whole grid's."""
    plan = getattr(result, "paint", None)
    if plan is not None:
        return [int(v) for v in plan.region.sum(dim=1).tolist()]
    h, w = result.grid
    return [int(h * w)] * int(result.tokens.shape[0])


def work_fields(result: Any, planned: StepSchedule = PLANNED) -> dict:
    """images, steps_planned (T, or round(T * d) at a denoise d < 1, with schedule_steps and
    denoise), tokens_per_image, painting, official_steps and official_nfe_per_image (mean)."""
    counts = tokens_generated(result)
    turns = int(getattr(result, "turns", 1))  # a multi-turn edit: the official runs, one a turn
    official = [turns * official_passes(n, planned) for n in counts]
    out: dict = {
        "images": len(counts),
        "tokens_per_image": round(sum(counts) / len(counts), 2) if counts else 0.0,
        "painting": getattr(result, "paint", None) is not None,
        "official_steps": planned.steps,
        "official_nfe_per_image": round(sum(official) / len(official), 2) if official else 0.0,
    }
    out["steps_planned"] = planned.left * turns
    if turns > 1:
        out["turns"] = turns
    if planned.denoise < 1.0:
        out.update(denoise=planned.denoise, schedule_steps=planned.steps)
    return out


def plural(count: float, one: str, many: str) -> str:
    """The word for a count: plural(1, "pass", "passes") -> "pass"."""
    return one if count == 1 else many


def _num(value: float) -> str:
    """12 -> "12", 12.5 -> "12.5"."""
    return f"{value:.0f}" if abs(value - round(value)) < 0.05 else f"{value:.1f}"


def _versus(used: float, official: float) -> str:
    """"2.8x fewer" / "1.3x more" / "as many" (used and official passes, both > 0)."""
    ratio = official / used
    if ratio >= 1.05:
        return f"{ratio:.1f}x fewer"
    if ratio <= 1 / 1.05:
        return f"{1 / ratio:.1f}x more"
    return "as many"


def _passes(stats: dict) -> str:
    """"13 forward passes vs 36 for the official sampler (64 steps, 36 tokens to regenerate):
    2.8x fewer" (per image for a batch; no comparison for the official sampler itself)."""
    images = int(stats.get("images", 1))
    used = float(stats["nfe_per_image"])
    shown = _num(used)
    text = f"{shown} forward {plural(float(shown), 'pass', 'passes')}" + (
        " per image" if images > 1 else "")
    official = stats.get("official_nfe_per_image")
    if official is None:
        return text
    steps = stats.get("official_steps", DEFAULT_STEPS)
    if stats["strategy"] == OFFICIAL and stats.get("schedule_steps",
                                                   stats.get("steps_planned")) == steps:
        return text + " (the official sampler)"
    tokens = _num(float(stats.get("tokens_per_image", 0)))
    job = f"{tokens} tokens to regenerate" if stats.get("painting") else f"{tokens} tokens"
    job = f"{stats['turns']} turns of {job}" if "turns" in stats else job
    if "denoise" in stats:  # the region's tokens, a share of them re-masked
        job = f"{tokens} tokens, denoise {float(stats['denoise']):g}"
    text += f" vs {_num(float(official))} for the official sampler ({steps} steps, {job})"
    if used > 0 and official > 0:
        text += f": {_versus(used, float(official))}"
    return text


def stats_text(stats: dict) -> str:
    """The STRING output's line: "ladr: done after 13 of 64 planned steps · <_passes> · 1.74 s"."""
    planned = stats.get("steps_planned")
    steps = int(stats["steps"])
    if stats.get("tokens_per_image", 1) == 0:
        run = "nothing to generate"
    elif planned:
        run = (f"{'done after ' if steps < planned else ''}{steps} of {planned} planned "
               f"{plural(planned, 'step', 'steps')}")
    else:
        run = f"{steps} {plural(steps, 'step', 'steps')}"
    if "schedule_steps" in stats:
        run = (f"{run} (denoise {float(stats['denoise']):g}: the last {planned} of "
               f"{stats['schedule_steps']})" if planned else
               f"denoise {float(stats['denoise']):g} redraws nothing: the picture's own tokens")
    text = f"{stats['strategy']}: {run} · {_passes(stats)} · {stats['seconds']:.2f} s"
    saved = float(stats.get("forwards_saved_pct", 0.0))
    if saved > 0:
        text += f" · ML-Cache recomputed {100 - saved:.0f}% of the tokens ({saved:.0f}% saved)"
    if stats.get("images", 1) > 1:
        text += f"; {stats['images']} images"
        if "in_flight" in stats:
            text += f", {stats['in_flight']} in flight"
    if "self_score" in stats:
        scores = ", ".join(f"{v:+.4f}" for v in stats["self_score"])
        text += (f"; self-score {scores} (mean log p per re-masked token, higher is better; "
                 f"{stats['self_score_passes']} extra "
                 f"{plural(stats['self_score_passes'], 'pass', 'passes')} per image)")
    return text
