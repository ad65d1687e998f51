"""The rivals' matched-forwards tables from the test-set and painting results.

    python -m lab.studies.samplers_table --test lab/results/samplers_test.json \
        --painting lab/results/samplers_painting.json \
        --out lab/results/samplers_summary.md

Reads lab/studies/quality.py's JSON (the rivals' picks `<rival>-n<budget>`, baseline-64 and the
baseline at each pick's rounded NFE, with their paired comparisons) and lab/studies/painting.py's
JSON (the same picks per painting task, each with its matched-NFE baseline), and writes one
markdown file: per budget, every rival's NFE and overall score with its paired 95 % interval
against baseline-64 and against the baseline at equal NFE; the ablation of LADR's frontier
(`ladr-n<b>` against LADR without locality at about the same NFE); the painting tasks. Every
figure is copied from the two JSON files, which record the commit and the machine, except one
kind, marked in the table: where the run holds no baseline at a pick's rounded NFE, the paired
interval against the baseline run nearest in NFE is computed here from the per-prompt results
the JSON stores (lab.studies.paired_stats, the same stratified bootstrap and seed as quality.py).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from lab.nano import scenes
from lab.studies import rivals
from lab.studies.paired_stats import group_index, paired_bootstrap

ROOT = Path(__file__).resolve().parents[2]


def _ci(d: dict[str, float] | None) -> str:
    if d is None:
        return "-"
    return f"{d['diff']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}]"


def _find(compare: list[dict[str, Any]], a: str, b: str) -> dict[str, Any] | None:
    return next((c for c in compare if c["a"] == a and c["b"] == b), None)


def nearest_baseline(doc: dict[str, Any], nfe: float) -> str | None:
    """The baseline run (other than baseline-64) nearest to `nfe` forwards, None if none."""
    runs = [k for k in doc["strategies"] if k.startswith("baseline-") and k != "baseline-64"
            and k.removeprefix("baseline-").isdigit()]
    return min(runs, key=lambda k: (abs(int(k.removeprefix("baseline-")) - nfe), k),
               default=None)


def _paired(doc: dict[str, Any], a: str, b: str) -> dict[str, float]:
    """The overall paired interval a - b from the per-prompt results (quality.py's bootstrap)."""
    specs, _ = scenes.prompt_set(doc["meta"]["set"], doc["meta"]["prompts"])
    gidx = group_index([scenes.group_of(s) for s in specs])
    ra, rb = doc["strategies"][a], doc["strategies"][b]
    return paired_bootstrap(np.array(ra["passed"]), np.array(rb["passed"]), gidx)["overall"]


def test_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per pick run on the test set: NFE, overall, and the two paired intervals
    (`computed`: the equal-NFE one was computed here against the nearest baseline run)."""
    out = []
    for name, spec in rivals.PICKS.items():
        r = doc["strategies"].get(name)
        if r is None:
            continue
        equal = f"baseline-{round(r['nfe_mean'])}"
        to64, toeq = _find(doc["compare"], name, "baseline-64"), _find(doc["compare"], name, equal)
        vseq, computed = (toeq["diff"]["overall"] if toeq else None), False
        if toeq is None and nearest_baseline(doc, r["nfe_mean"]) is not None:
            equal, computed = nearest_baseline(doc, r["nfe_mean"]), True
            vseq = _paired(doc, name, equal)
        out.append({"name": name, "setting": spec, "nfe": r["nfe_mean"],
                    "overall": r["score_overall"], "equal": equal, "computed": computed,
                    "vs64": to64["diff"]["overall"] if to64 else None, "vseq": vseq,
                    "equal_overall": doc["strategies"].get(equal, {}).get("score_overall")})
    return out


def test_table(doc: dict[str, Any]) -> list[str]:
    rows = test_rows(doc)
    base = doc["strategies"]["baseline-64"]
    lines = [f"Test set: {doc['meta']['prompts']} prompts; baseline-64 overall "
             f"{base['score_overall']:.3f}.", ""]
    for budget in sorted({int(r["name"].rsplit("-n", 1)[1]) for r in rows
                          if "-n" in r["name"]}):
        lines += [f"#### About {budget} forwards per image", "",
                  "| strategy | setting | NFE | overall | vs baseline-64 [95 % CI] | equal-NFE "
                  "baseline (overall) | vs equal-NFE baseline [95 % CI] |",
                  "|---|---|---:|---:|---:|---|---:|"]
        for r in sorted((r for r in rows if r["name"].endswith(f"-n{budget}")),
                        key=lambda r: -r["overall"]):
            eq = (f"{r['equal']} ({r['equal_overall']:.3f}){' *' if r['computed'] else ''}"
                  if r["equal_overall"] is not None else "-")
            lines.append(f"| {r['name'].rsplit('-n', 1)[0]} | `{r['setting']}` | "
                         f"{r['nfe']:.1f} | {r['overall']:.3f} | {_ci(r['vs64'])} | {eq} | "
                         f"{_ci(r['vseq'])} |")
        lines.append("")
    if any(r["computed"] for r in rows):
        lines += ["\\* No baseline ran at this pick's rounded NFE; the interval is against the "
                  "baseline run nearest in NFE, computed by lab/studies/samplers_table.py from the "
                  "per-prompt results in the JSON.", ""]
    lines += ["#### The ablation: LADR's frontier against no locality", "",
              "| LADR (frontier) | NFE | overall | no locality | NFE | overall | no locality "
              "- frontier [95 % CI] |", "|---|---:|---:|---|---:|---:|---:|"]
    for other, ladr in rivals.ablation_pairs(doc["strategies"]):
        a, b = doc["strategies"][other], doc["strategies"][ladr]
        c = _find(doc["compare"], other, ladr)
        lines.append(f"| {ladr} | {b['nfe_mean']:.1f} | {b['score_overall']:.3f} | {other} | "
                     f"{a['nfe_mean']:.1f} | {a['score_overall']:.3f} | "
                     f"{_ci(c['diff']['overall'] if c else None)} |")
    return lines + [""]


def painting_table(doc: dict[str, Any]) -> list[str]:
    lines = [f"Painting: {doc['meta']['prompts']} scenes per task.", ""]
    for task, t in doc["tasks"].items():
        rows = t["settings"]
        lines += [f"#### {task} (mask share {t['mask_share_mean']:.2f}; baseline-64 NFE "
                  f"{rows['baseline-64']['nfe_mean']:.1f}, overall "
                  f"{rows['baseline-64']['score_overall']:.3f})", "",
                  "| setting | NFE | overall | vs baseline-64 [95 % CI] | matched baseline "
                  "(T, overall) | vs matched baseline [95 % CI] |",
                  "|---|---:|---:|---:|---|---:|"]
        for name in rivals.PICKS:
            if name not in rows:
                continue
            r, m = rows[name], rows[f"baseline@{name}"]
            lines.append(
                f"| {name} | {r['nfe_mean']:.1f} | {r['score_overall']:.3f} | "
                f"{_ci(next((c['overall_diff'] for c in t['compare'] if c['a'] == name and c['b'] == 'baseline-64'), None))} | "  # noqa: E501
                f"T {m['steps']}, {m['score_overall']:.3f} | "
                f"{_ci(next((c['overall_diff'] for c in t['compare'] if c['a'] == name and c['b'] == f'baseline@{name}'), None))} |")  # noqa: E501
        lines.append("")
    return lines


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--test", default=str(ROOT / "lab/results/samplers_test.json"))
    ap.add_argument("--painting", default="")
    ap.add_argument("--out", default=str(ROOT / "lab/results/samplers_summary.md"))
    a = ap.parse_args(argv)
    test = json.loads(Path(a.test).read_text())
    lines = ["### Text to image (test set)", "", *test_table(test)]
    sources = [f"{a.test} (commit {test['env']['git_commit']}, {test['env']['processor']})"]
    if a.painting:
        paint = json.loads(Path(a.painting).read_text())
        lines += ["### Painting (test scenes)", "", *painting_table(paint)]
        sources.append(f"{a.painting} (commit {paint['env']['git_commit']}, "
                       f"{paint['env']['processor']})")
    lines += ["Sources: " + "; ".join(sources) + "."]
    text = "\n".join(lines) + "\n"
    Path(a.out).write_text(text)
    print(text)
    return text


if __name__ == "__main__":
    main()
