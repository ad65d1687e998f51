"""The tables of docs/reports/EMOJI.md, written from the committed results files:
``python -m lab.emoji.report`` prints them; a test holds the page to them."""

from __future__ import annotations

import json
from pathlib import Path

from lab.emoji.scenes import CATEGORIES

RESULTS = Path(__file__).resolve().parents[1] / "results"


def _load(name: str) -> dict | None:
    path = RESULTS / name
    return json.loads(path.read_text()) if path.is_file() else None


def judge_table() -> str:
    """Judge pass rate of ground-truth test scenes per category, by style."""
    d = _load("emoji_judge.json")
    if d is None:
        return ""
    rows = [("OpenMoji (held out)", d["held_out_style"])]
    rows += [(s["style"].capitalize() + " (trained)", s) for s in d["training_styles"]]
    head = "| style | " + " | ".join(CATEGORIES) + " | mean | emoji named right |"
    lines = [head, "|" + "---|" * (len(CATEGORIES) + 3)]
    for name, r in rows:
        cells = " | ".join(f"{r['pass_rate'][c]:.2f}" for c in CATEGORIES)
        lines.append(f"| {name} | {cells} | {r['pass_rate_mean']:.2f} | "
                     f"{r['naming_accuracy_mean']:.2f} |")
    return "\n".join(lines)


def judge_misses() -> str:
    d = _load("emoji_judge.json")
    if d is None:
        return ""
    acc = d["held_out_style"]["naming_accuracy"]
    return ", ".join(f"{k} {v:.2f}" for k, v in sorted(acc.items()) if v < 0.9) or "none"


def vq_table(name: str = "emoji_vq.json") -> str:
    """Judge pass rate of VQ round trips of ground-truth test scenes, by style."""
    d = _load(name)
    if d is None:
        return ""
    lines = ["| style | " + " | ".join(CATEGORIES) + " | mean | ground truth | mean abs error |"
             " Frechet (round trip vs real) |", "|" + "---|" * (len(CATEGORIES) + 5)]
    for style in ("noto", "twemoji", "openmoji"):
        r = d[style]
        cells = " | ".join(f"{r['round_trip'][c]:.2f}" for c in CATEGORIES)
        lines.append(f"| {style} | {cells} | {r['round_trip']['mean']:.2f} | "
                     f"{r['ground_truth']['pass_rate_mean']:.2f} | {r['mean_abs_error']:.3f} | "
                     f"{r['frechet_round_trip_vs_real']:.1f} |")
    return "\n".join(lines)


def training_line() -> str:
    """Where the transformer run stood when the curve file was written."""
    d = _load("emoji_training.json")
    if d is None or "transformer" not in d:
        return ""
    h = d["transformer"]["history"]
    return (f"step {d['transformer']['step']:,}: masked-code loss (running mean) "
            f"{h[0]['loss']:.2f} at step {h[0]['step']}, {h[-1]['loss']:.2f} at step "
            f"{h[-1]['step']:,}; {d['codes']['distinct_codes']} distinct codes in "
            f"{d['codes']['scenes']:,} training scenes")


def gate_line() -> str:
    """What the verdict harness said of the checkpoint it last ran on (its gate): the full run's
    file when it exists, else the early gate run's."""
    d = _load("emoji_verdicts.json") or _load("emoji_verdicts_gate.json")
    if d is None:
        return ""
    g, sc = d["gate"], d["baseline"]["score"]
    cats = ", ".join(f"{c} {sc[c]:.2f}" for c in CATEGORIES if c in sc)
    return (f"at training step {d['checkpoint']['step']:,} (masked-code loss "
            f"{d['checkpoint']['loss']:.2f}), baseline-64 passes {g['baseline_single_object']:.2f}"
            f" of {g['single_object_prompts']} single-object test prompts (gate "
            f"{g['threshold']}; {d['prompts']['test']} test prompts: {cats})")


def guidance_table() -> str:
    """The guidance sweep on validation prompts (lab.emoji.guidance)."""
    d = _load("emoji_guidance.json")
    if d is None:
        return ""
    names = [k for k in d["rows"][0] if isinstance(d["rows"][0][k], dict)]
    lines = ["| scale | " + " | ".join(f"{n} (overall)" for n in names) + " | mean |",
             "|---" * (len(names) + 2) + "|"]
    for r in d["rows"]:
        mark = " (pick)" if r["cfg"] == d["pick"] else ""
        lines.append(f"| {r['cfg']}{mark} | " + " | ".join(f"{r[n]['overall']:.2f}" for n in names)
                     + f" | {r['mean_overall']:.3f} |")
    return "\n".join(lines)


def _ci(c: dict | None) -> str:
    return "" if c is None else f"{c['diff']:+.2f} [{c['lo']:+.2f}, {c['hi']:+.2f}]"


def t2i_table() -> str:
    """Every text-to-image setting of the verdicts against the official sampler at 64 steps and
    at its own forwards (the matched run the harness made for it)."""
    d = _load("emoji_verdicts.json")
    if d is None or "t2i" not in d:
        return ""
    rows, comp = d["t2i"]["settings"], d["t2i"]["compare"]
    diff = {(c["a"], c["b"]): c["diff"]["overall"] for c in comp}
    lines = ["| setting | forwards | pass rate | vs official, 64 steps | vs official, same forwards |",
             "|---|---|---|---|---|"]
    for name in sorted(rows, key=lambda n: (-rows[n]["nfe_mean"], n)):
        r = rows[name]
        same = next((diff[k] for k in diff if k[0] == name and k[1] != "baseline-64"
                     and k[1].startswith("baseline")), None)
        lines.append(f"| `{name}` | {r['nfe_mean']:.1f} | {r['score_overall']:.2f} | "
                     f"{_ci(diff.get((name, 'baseline-64')))} | {_ci(same)} |")
    return "\n".join(lines)


def edits_table() -> str:
    """Image to image (both routes, each strength) and inpainting: each setting's pass rate and
    forwards, and its interval against 64 steps and against the official sampler at its
    forwards."""
    d = _load("emoji_verdicts.json")
    if d is None or "i2i" not in d:
        return ""
    lines = ["| task | setting | forwards | pass rate | vs official, 64 steps | vs same forwards |",
             "|---|---|---|---|---|---|"]
    blocks = [(f"{route} route, strength {st}", d["i2i"][route][st])
              for route in ("picture", "token") for st in sorted(d["i2i"][route])]
    if "inpaint" in d:
        blocks.append(("inpaint one object", d["inpaint"]))
    for task, block in blocks:
        diff = {(c["a"], c["b"]): c["overall_diff"] for c in block["compare"]}
        for name, r in block["settings"].items():
            if name.startswith("baseline@"):
                continue
            lines.append(f"| {task} | `{name}` | {r['nfe_mean']:.1f} | {r['score_overall']:.2f}"
                         f" | {_ci(diff.get((name, 'baseline-64')))} | "
                         f"{_ci(diff.get((name, f'baseline@{name}')))} |")
    return "\n".join(lines)


def tables() -> dict[str, str]:
    return {"judge": judge_table(), "judge_misses": judge_misses(), "vq": vq_table(),
            "vq_all_styles": vq_table("emoji_vq_all_styles.json"), "training": training_line(),
            "gate": gate_line(), "guidance": guidance_table(), "t2i": t2i_table(),
            "edits": edits_table()}


if __name__ == "__main__":
    for name, text in tables().items():
        print(f"<!-- {name} -->\n{text}\n")
