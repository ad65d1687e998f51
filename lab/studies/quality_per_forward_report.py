"""The results of ``lab.studies.quality_per_forward``: one file, one figure, one README block.

    python -m lab.studies.quality_per_forward_report            # from the run store
    python -m lab.studies.quality_per_forward_report --from-file # figure, README, report only

``collect`` reads the run store and writes ``lab/results/quality_per_forward.json``: per
(testbed, rule, steps) whose every prompt is stored, a row with the commit(s) and machine its
chunks ran on, the prompts, the mean forwards per image, the pass rate (``pass_rate``: share of
prompts passed; ``score``: the mean of the categories' pass rates, GenEval-style, as README's
tables, with its own stratified 95 % bootstrap interval ``score_ci``), and the paired 95 %
intervals of ``score`` against the official sampler at 64 steps (``vs_64``) and at the same
forwards (``vs_same_forwards``: ``quality_per_forward.ROUNDING``), each None while its
reference is not complete; ``pending`` lists every job of the grid not complete. The figure
(one panel per testbed: score against mean forwards, a line per rule, its intervals), the
README block and docs/reports/QUALITY_PER_FORWARD.md are made from that file alone, so the
documents hold only complete, committed figures (lab/tests/docs/test_quality_per_forward_docs.py).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from lab.benchmarks.common import env_info, json_text, save_figure
from lab.studies import quality_per_forward as Q
from lab.studies.paired_stats import group_index, paired_bootstrap, scores

RESULTS = Q.ROOT / "lab" / "results" / "quality_per_forward.json"
FIGURE = RESULTS.with_suffix(".png")
REPORT = Q.ROOT / "docs" / "reports" / "QUALITY_PER_FORWARD.md"
README = Q.ROOT / "README.md"
BLOCK = r"(<!-- quality_per_forward:begin -->\n)(.*?)(<!-- quality_per_forward:end -->)"


def interval(a: np.ndarray, b: np.ndarray, gidx: np.ndarray) -> dict[str, float]:
    """score(a) - score(b): the paired, stratified 95 % bootstrap interval (paired_stats)."""
    d = paired_bootstrap(a, b, gidx)["overall"]
    return {k: round(float(d[k]), 4) for k in ("diff", "lo", "hi")}


def _provenance(path: Path) -> dict[str, Any]:
    side = json.loads(path.with_suffix(".json").read_text())
    chunks = side["chunks"].values()
    return {"commit": ",".join(sorted({c["commit"] for c in chunks})),
            "device": ",".join(sorted({c["device"] for c in chunks})),
            "torch_threads": max(c["torch_threads"] for c in chunks),
            "wall_s": round(sum(c["wall_s"] for c in chunks), 1),
            "cpu_s": round(sum(c["cpu_s"] for c in chunks), 1)
            if all("cpu_s" in c for c in chunks) else None,  # chunks before it was recorded
            "setting": side["setting"]}


def rows_of(bed: Q.Testbed, runs: Path, chunk: int, cfg: float) -> tuple[list[dict], list[dict]]:
    """(complete rows, pending jobs) of one testbed: the grid of every rule, and the official
    sampler at any further steps stored (the same-forwards references)."""
    gidx = group_index(bed.groups)
    stored = sorted(int(p.stem.split("-s")[-1]) for p in (runs / bed.name).glob("baseline-s*.npz"))
    jobs = [(r, s) for r in Q.rules() for s in Q.STEPS]
    jobs += [("baseline", s) for s in stored if s not in Q.STEPS]
    done = {j: Q.finished(runs, bed, *j, chunk, cfg) for j in jobs}
    rows, pending = [], []
    for (rule, steps), run in done.items():
        if run is None:
            if steps in Q.STEPS:
                path = Q.store_path(runs, bed.name, rule, steps)
                have = len(json.loads(path.with_suffix(".json").read_text())["chunks"]) \
                    if path.with_suffix(".json").is_file() else 0
                pending.append({"model": bed.name, "rule": rule, "steps": steps,
                                "chunks_stored": have,
                                "chunks": -(-len(bed.captions) // chunk)})
            continue
        passed, nfe = run["passed"], run["nfe"]
        ref = done.get(("baseline", Q.REFERENCE_STEPS))
        same = done.get(("baseline", Q.matched_steps(float(nfe.mean()))))
        rows.append({
            "model": bed.name, "rule": rule, "steps": steps, "grid": steps in Q.STEPS,
            "prompts": len(passed), "forwards_mean": round(float(nfe.mean()), 3),
            "pass_rate": round(float(passed.mean()), 4),
            "score": round(scores(passed, gidx)["overall"], 4),
            "score_ci": interval(passed, np.zeros_like(passed), gidx),
            "vs_64": None if ref is None or (rule, steps) == ("baseline", 64)
            else interval(passed, ref["passed"], gidx),
            "same_forwards_steps": Q.matched_steps(float(nfe.mean())),
            "vs_same_forwards": None if same is None or rule == "baseline"
            else interval(passed, same["passed"], gidx),
            **_provenance(Q.store_path(runs, bed.name, rule, steps))})
    return rows, pending


def _judge_sha() -> str | None:
    """sha256 of the emoji judge's weights (trained by lab.emoji.judge_eval, in the cache)."""
    import hashlib

    from lab.emoji.judge_eval import judge_dir

    path = judge_dir() / "judge.safetensors"
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def same_product(commits: set[str]) -> bool | None:
    """Whether the product (ladr_core/, nodes/) is the same at every commit (git), so rows
    whose chunks ran at several commits ran one sampler; None outside a git checkout."""
    import subprocess

    first, *rest = sorted(commits) or [""]
    try:
        return all(subprocess.run(["git", "diff", "--quiet", first, c, "--", "ladr_core",
                                   "nodes"], cwd=Q.ROOT, check=False).returncode == 0
                   for c in rest)
    except OSError:
        return None


def collect(beds: list[Q.Testbed], runs: Path, cfgs: dict[str, float]) -> dict[str, Any]:
    """The results document (module docstring)."""
    rows, pending = [], []
    for bed in beds:
        r, p = rows_of(bed, runs, Q.CHUNK[bed.name], cfgs[bed.name])
        rows += r
        pending += p
    return {"env": env_info(), "command": "python -m lab.studies.quality_per_forward_report",
            "meta": {"rules": list(Q.rules()), "steps": list(Q.STEPS), "rounding": Q.ROUNDING,
                     "testbeds": {b.name: {"prompts": b.prompts, "n": len(b.captions),
                                           "seed0": b.seed0, "cfg": cfgs[b.name],
                                           "chunk": Q.CHUNK[b.name]} for b in beds},
                     "judges": {"nano": "lab.nano.evaluator", "emoji": {
                         "code": "lab.emoji.judge", "weights_sha256": _judge_sha()}},
                     "score": "mean over the categories of the share of prompts passed",
                     "intervals": "paired, stratified 95 % bootstrap (lab.studies.paired_stats"
                     ", 4000 resamples); score_ci: the score's own (paired against zero)"},
            "rows": rows, "pending": pending,
            "product_same_at_every_commit": same_product(
                {c for r in rows for c in r["commit"].split(",")})}


def figure(doc: dict[str, Any], path: Path) -> None:
    """One panel per testbed: score against mean forwards, a line per rule over its complete
    grid steps (the official sampler's also through the steps run at other rules' forwards),
    vertical bars = the score's 95 % interval."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    beds = list(doc["meta"]["testbeds"])
    fig, axes = plt.subplots(1, len(beds), figsize=(6 * len(beds), 4.6), dpi=100, sharey=True,
                             squeeze=False)
    for ax, bed in zip(axes[0], beds, strict=True):
        for i, rule in enumerate(doc["meta"]["rules"]):
            pts = sorted((r for r in doc["rows"] if r["model"] == bed and r["rule"] == rule
                          and (r["grid"] or rule == "baseline")), key=lambda r: r["steps"])
            if not pts:
                continue
            x = [r["forwards_mean"] for r in pts]
            y = [r["score"] for r in pts]
            err = [[r["score"] - r["score_ci"]["lo"] for r in pts],
                   [r["score_ci"]["hi"] - r["score"] for r in pts]]
            ax.errorbar(x, y, yerr=err, marker="o", ms=4, capsize=3, color=f"C{i}",
                        label=rule if rule != "baseline" else "official sampler (baseline)")
        n = doc["meta"]["testbeds"][bed]["n"]
        ax.set_title(f"DiMOO-{bed}: {n} test prompts")
        ax.set_xscale("log", base=2)
        ax.set_xticks([2, 4, 8, 16, 32, 64], ["2", "4", "8", "16", "32", "64"])
        ax.set_xlim(1.8, 72)
        ax.set_xlabel("forward passes per image (mean), log scale")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8, loc="lower right")
    axes[0][0].set_ylabel("pass rate (mean over categories)")
    fig.suptitle("Quality per forward, steps 8-64 and the official sampler at each rule's "
                 "forwards (complete runs only; bars: 95 % interval)", fontsize=11)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def _ci(d: dict[str, float] | None) -> str:
    return "pending" if d is None else f"{d['diff']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}]"


def _commits(listed: str) -> str:
    first, *rest = listed.split(",")
    return first + (f" (+{len(rest)})" if rest else "")


def _verdict(d: dict[str, float] | None) -> str:
    if d is None:
        return "pending"
    return "better" if d["lo"] > 0 else "worse" if d["hi"] < 0 else "no difference detected"


def table(doc: dict[str, Any]) -> str:
    """docs/reports/QUALITY_PER_FORWARD.md's table: every complete row."""
    lines = ["| model | rule | steps | prompts | forwards per image | pass rate | score | "
             "vs official, 64 steps | official at the same forwards (steps) | vs it | commit |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in doc["rows"]:
        lines.append(f"| {r['model']} | `{r['rule']}` | {r['steps']} | {r['prompts']} | "
                     f"{r['forwards_mean']:.1f} | {r['pass_rate']:.3f} | {r['score']:.3f} | "
                     f"{_ci(r['vs_64'])} | {r['same_forwards_steps']} | "
                     f"{'-' if r['rule'] == 'baseline' else _ci(r['vs_same_forwards'])} | "
                     f"{_commits(r['commit'])} |")
    return "\n".join(lines) + "\n"


def _steps(rows: list[dict]) -> str:
    return ", ".join(str(r["steps"]) for r in rows)


def summary(doc: dict[str, Any]) -> str:
    """README's words: per testbed, the steps complete for each rule and each LADR rule's
    verdict against the official sampler at the same forwards; the rules not run at all."""
    out, idle = [], []
    for bed in doc["meta"]["testbeds"]:
        said = []
        for rule in doc["meta"]["rules"]:
            rows = sorted((r for r in doc["rows"] if r["model"] == bed and r["rule"] == rule
                           and r["grid"]), key=lambda r: r["steps"])
            if not rows:
                idle.append(f"{bed} `{rule}`")
                continue
            verdicts: dict[str, list[dict]] = {}
            for r in rows:
                verdicts.setdefault(_verdict(r["vs_same_forwards"]), []).append(r)
            said.append(f"`{rule}` at steps {_steps(rows)}" + ("" if rule == "baseline" else
                        " (vs the official sampler at the same forwards: " + "; ".join(
                            f"{v} at {_steps(rs)}" for v, rs in verdicts.items()) + ")"))
        out.append(f"{bed}: " + (", ".join(said) or "nothing yet"))
    return ("Complete on every test prompt so far: " + ". ".join(out) + ". No steps complete yet: "
            + (", ".join(idle) or "none") + ".")


LABEL = {"ladr": "`ladr`, the paper's policy", "nano": "LADR Policy `nano`",
         "adaptive": "LADR Policy `adaptive`"}
MARK = {"better": "▲", "worse": "▼", "no difference detected": "=", "pending": ".."}


def verdict_table(doc: dict[str, Any]) -> str:
    """README's table: for each LADR rule and each `steps` of the grid, on each testbed (nano ·
    emoji), the mean forwards per image and the verdict against the official sampler at the
    same forwards (▲ better, = no difference detected, ▼ worse; "..": not complete yet)."""
    beds, steps = list(doc["meta"]["testbeds"]), doc["meta"]["steps"]
    done = {(r["model"], r["rule"], r["steps"]): r for r in doc["rows"] if r["grid"]}

    def one(bed: str, rule: str, s: int) -> str:
        r = done.get((bed, rule, s))
        return ".." if r is None else \
            f"{r['forwards_mean']:.1f} {MARK[_verdict(r['vs_same_forwards'])]}"

    lines = [f"| rule ({' · '.join(beds)}) | " + " | ".join(f"`steps` {s}" for s in steps)
             + " |", "|---|" + "---|" * len(steps)]
    for rule in doc["meta"]["rules"]:
        if rule != "baseline":
            lines.append(f"| {LABEL.get(rule, f'`{rule}`')} | " + " | ".join(
                " · ".join(one(bed, rule, s) for bed in beds) for s in steps) + " |")
    return "\n".join(lines) + "\n"


def readme_block(doc: dict[str, Any]) -> str:
    shown = any(r["grid"] for r in doc["rows"])
    pic = "![quality per forward](lab/results/quality_per_forward.png) " if shown else ""
    return (pic + "**Quality per forward on both built-in models**: each LADR rule at each "
            "`steps`, its forward passes per image and its score against the official sampler "
            "run at the same forwards on the same prompts and seeds (paired 95 % interval: ▲ "
            "better, = no difference detected, ▼ worse; ..: not run on every test prompt yet), "
            "each cell nano · emoji. Source: `lab/results/quality_per_forward.json` (commits, machine, both "
            "intervals: [QUALITY_PER_FORWARD.md](docs/reports/QUALITY_PER_FORWARD.md)).\n\n"
            + verdict_table(doc))


def cost(doc: dict[str, Any]) -> str:
    """The page's estimate of the full grid in CPU-hours, from the throughput files
    (``quality_per_forward throughput``: CPU seconds per image-forward of each rule, one
    thread): every rule at every steps spending at most `steps` forwards per image (the cost
    contract), plus at most as much again for the official runs at the same forwards."""
    out = []
    for bed, t in doc["meta"]["testbeds"].items():
        path = RESULTS.with_name(f"quality_per_forward_throughput_{bed}.json")
        if not path.is_file():
            continue
        tp = json.loads(path.read_text())
        per = {}
        for r in tp["rows"]:
            per.setdefault(r["rule"], []).append(r["cpu_s_per_image_forward"])
        c = {rule: float(np.median(v)) for rule, v in per.items()}
        grid = sum(c.get(rule, max(c.values())) for rule in doc["meta"]["rules"]) * \
            sum(doc["meta"]["steps"]) * t["n"] / 3600
        base = c["baseline"] * sum(doc["meta"]["steps"]) * t["n"] / 3600
        rules = len(doc["meta"]["rules"]) - 1
        out.append(f"- {bed}: {', '.join(f'`{r}` {v * 1000:.1f}' for r, v in c.items())} CPU ms "
                   f"per image-forward (`{path.name}`, commit {tp['env']['git_commit']}, "
                   f"{tp['env']['processor']}); the grid at most {grid:.1f} CPU-hours, the "
                   f"official runs at the same forwards at most {base * rules:.1f} more")
    return ("Cost (upper bounds: every rule at `steps` forwards per image):\n\n"
            + "\n".join(out) + "\n\n") if out else ""


def write_docs(doc: dict[str, Any]) -> None:
    figure(doc, FIGURE)
    REPORT.write_text("# Quality per forward on both built-in models\n\nGenerated by `python -m "
                      "lab.studies.quality_per_forward_report --from-file` from "
                      "`lab/results/quality_per_forward.json`; do not edit.\n\n"
                      f"Rounding: {doc['meta']['rounding']}. Commit: the first of the commits the "
                      "row's chunks ran at (all in the results file); the product (ladr_core/, "
                      "nodes/) is the same at all of them: "
                      f"{doc.get('product_same_at_every_commit')}.\n\n"
                      + "".join(f"- {b}: {t['prompts']}, item i seed {t['seed0']} + i, cfg "
                                f"{t['cfg']}\n" for b, t in doc["meta"]["testbeds"].items())
                      + "\n" + verdict_table(doc) + "\n" + cost(doc) + table(doc)
                      + "\n" + summary(doc) + "\n")
    text = README.read_text(encoding="utf-8")
    new, n = re.subn(BLOCK, lambda m: m.group(1) + readme_block(doc) + m.group(3), text,
                     flags=re.S)
    if n != 1:
        raise SystemExit("README.md needs one <!-- quality_per_forward:begin --> ... "
                         "<!-- quality_per_forward:end --> block")
    README.write_text(new, encoding="utf-8")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--from-file", action="store_true",
                    help="skip the run store: the figure and documents from the results file")
    ap.add_argument("--runs", default=str(Q.RUNS))
    a = ap.parse_args(argv)
    if a.from_file:
        doc = json.loads(RESULTS.read_text())
    else:
        from ladr_core import emoji_default_cfg, nano_default_cfg

        beds = [Q.TESTBEDS[name]() for name in Q.TESTBEDS]
        doc = collect(beds, Path(a.runs), {"nano": nano_default_cfg(),
                                           "emoji": emoji_default_cfg()})
        RESULTS.write_text(json_text(doc))
    write_docs(doc)
    print(f"wrote {RESULTS}, {FIGURE}, {REPORT}, README's block")
    return doc


if __name__ == "__main__":
    main()
