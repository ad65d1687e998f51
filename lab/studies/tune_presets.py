"""Tune the LADR presets again under the cost contract, on validation prompts of both models.

A preset brings no schedule: it plans within the user's `steps` and can only finish earlier, so
what it tunes is how much quality it keeps for the forwards it saves. Each family below lists
the preset's current setting first and a few neighbours of it. A candidate's *gain* on a
testbed at one `steps` is its score minus the official sampler's score at the same forwards
(linear in forwards between the official sampler's scores at the two neighbouring
`BASELINE_STEPS`, on the same prompts and seeds); its *worth* is its smallest gain over both
models and `STEPS` (the default rule must never be worse on either model); the pick of a family
is the candidate of largest worth, the current setting on a tie. Prompts: the *validation*
splits (nano ``validation_specs``, image seeds 0..; emoji ``prompt_scenes(n, "validation",
VAL_SEED)``), never the test prompts the curves (``lab.studies.quality_per_forward``) report.

    OMP_NUM_THREADS=1 nice -n 19 python -m lab.studies.tune_presets run --model nano
    python -m lab.studies.tune_presets report     # lab/results/preset_tuning.json
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lab.benchmarks.common import env_info
from lab.studies.paired_stats import group_index, paired_bootstrap, scores
from lab.studies.quality_per_forward import TESTBEDS, Testbed, run_chunk
from lab.studies.run_store import load_chunk, save_chunk
from ladr_core import LADR, AdaptiveRescue, LADRPolicy

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "lab" / "results" / "preset_tuning_runs"
RESULTS = ROOT / "lab" / "results" / "preset_tuning.json"
STEPS = (12, 24)
BASELINE_STEPS = (3, 4, 5, 6, 7, 8, 9, 10, 12, 14, 16, 20, 24)
PROMPTS = 120
CHUNK = 40

_GREEDY = {"selection": "gumbel", "rescue_token": "argmax", "seen_only": True}
FAMILIES: dict[str, dict[str, LADRPolicy]] = {
    "adaptive": {f"pace {p:g}, anchor {q:g}": LADRPolicy(
        adaptive=AdaptiveRescue(pace=p, anchor_quantile=q), **_GREEDY)
        for p, q in ((3.0, 0.5), (1.5, 0.5), (6.0, 0.5), (3.0, 0.25), (3.0, 0.75), (6.0, 0.75))},
    "nano": {f"tau {t:g}": LADRPolicy(tau=(t,) * 3, alpha=(1.0, 1.0, 1.0), **_GREEDY)
             for t in (0.9, 0.8, 0.95)},
}
"""Per preset: candidate label -> policy, the preset's setting at the time of tuning first."""


def _cells(bed: Testbed) -> Iterator[tuple[str, Any, int]]:
    """(label, strategy, steps) of every run on one testbed: the official sampler first."""
    for s in BASELINE_STEPS:
        yield "baseline", "baseline", s
    for family, cands in FAMILIES.items():
        for label, policy in cands.items():
            for s in STEPS:
                yield f"{family}: {label}", LADR(policy=policy), s


def _path(runs: Path, bed: str, label: str, steps: int) -> Path:
    safe = "".join(c if c.isalnum() or c in "-." else "_" for c in label)
    return runs / bed / f"{safe}-s{steps:02d}.npz"


def _key(strategy: Any, steps: int, cfg: float, seed0: int, lo: int, hi: int) -> str:
    return repr((repr(strategy), steps, cfg, seed0, lo, hi))


def cell(pipe: Any, bed: Testbed, label: str, strategy: Any, steps: int, runs: Path,
         run: bool) -> dict[str, np.ndarray] | None:
    """One cell's verdicts and forwards per prompt: stored chunks, the missing ones generated
    when `run`; None while a chunk is missing and not `run`."""
    path, name, parts = _path(runs, bed.name, label, steps), f"{label}@{steps}", []
    for lo in range(0, len(bed.captions), CHUNK):
        hi = min(lo + CHUNK, len(bed.captions))
        key = _key(strategy, steps, pipe.default_cfg if pipe else None, bed.seed0, lo, hi)
        part = load_chunk(path, name, lo, key if pipe else None)
        if part is None and not run:
            return None
        if part is None:
            part = run_chunk(pipe, bed, label, steps, lo, hi, strategy=strategy)
            save_chunk(path, name, lo, key, part)
            print(f"{bed.name} {name:34s} [{hi}/{len(bed.captions)}] "
                  f"nfe={part['nfe'].mean():5.2f} pass={part['passed'].mean():.2f}", flush=True)
        parts.append(part)
    return {f: np.concatenate([p[f] for p in parts]) for f in ("passed", "nfe")}


def at_forwards(curve: list[tuple[float, float]], forwards: float) -> float:
    """The official sampler's score at `forwards`: linear between its neighbouring steps
    (clamped to the ends of the curve); `curve` = [(steps, score)] in order of steps."""
    xs, ys = zip(*curve, strict=True)
    return float(np.interp(forwards, xs, ys))


def _vs_current(got: dict[tuple[str, int], Any], label: str, steps: int,
                gidx: np.ndarray) -> dict[str, float] | None:
    """A candidate's score minus its family's current setting's (the first candidate) on the
    same prompts and seeds, with the paired 95 % interval; None for the current setting."""
    family = label.split(": ")[0]
    current = f"{family}: {next(iter(FAMILIES[family]))}"
    if label == current:
        return None
    d = paired_bootstrap(got[label, steps]["passed"], got[current, steps]["passed"], gidx)
    return {k: round(v, 4) for k, v in d["overall"].items()}


def report(runs: Path, n: int) -> dict[str, Any]:
    """Every candidate's score, forwards, gain and difference from its family's current setting
    per model and steps; worth and pick per family. Reads the store only (every cell must be complete)."""
    rows: dict[str, dict[str, Any]] = {}
    prompts: dict[str, str] = {}
    for name, make in TESTBEDS.items():
        bed = make(n, "validation")
        prompts[name] = bed.prompts
        gidx = group_index(bed.groups)
        got = {(lab, s): cell(None, bed, lab, st, s, runs, False) for lab, st, s in _cells(bed)}
        missing = [f"{lab}@{s}" for (lab, s), v in got.items() if v is None]
        if missing:
            raise SystemExit(f"{name}: cells not run yet: {', '.join(missing)}")
        curve = [(s, scores(got["baseline", s]["passed"], gidx)["overall"])
                 for s in BASELINE_STEPS]
        for (lab, s), v in got.items():
            if lab == "baseline":
                continue
            fw, sc = float(v["nfe"].mean()), scores(v["passed"], gidx)["overall"]
            official = at_forwards(curve, fw)
            rows.setdefault(lab, {})[f"{name}@{s}"] = {
                "forwards": round(fw, 3), "score": round(sc, 4),
                "official_at_same_forwards": round(official, 4), "gain": round(sc - official, 4),
                "vs_current": _vs_current(got, lab, s, gidx)}
    picks = {}
    for family, cands in FAMILIES.items():
        worth = {lab: min(c["gain"] for c in rows[f"{family}: {lab}"].values()) for lab in cands}
        for lab in cands:
            rows[f"{family}: {lab}"]["worth"] = worth[lab]
        best = max(worth.values())
        picks[family] = next(lab for lab in cands if worth[lab] == best)   # first = current
    return {"env": env_info(), "command": "python -m lab.studies.tune_presets report",
            "prompts": prompts,
            "steps": list(STEPS), "baseline_steps": list(BASELINE_STEPS),
            "criterion": __doc__.split("\n\n")[1].replace("\n", " "),
            "policies": {f"{f}: {lab}": repr(p) for f, c in FAMILIES.items()
                         for lab, p in c.items()},
            "rows": rows, "picks": picks}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("command", choices=("run", "report"))
    ap.add_argument("--model", choices=tuple(TESTBEDS), default="nano")
    ap.add_argument("--prompts", type=int, default=PROMPTS)
    ap.add_argument("--runs", default=str(RUNS))
    ap.add_argument("--json", default=str(RESULTS))
    a = ap.parse_args(argv)
    if a.prompts < 1:
        ap.error("--prompts must be >= 1")
    if a.command == "report":
        doc = report(Path(a.runs), a.prompts)
        Path(a.json).write_text(json.dumps(doc, indent=1) + "\n")
        print(json.dumps(doc["picks"]))
        return
    torch.set_num_threads(1)
    bed = TESTBEDS[a.model](a.prompts, "validation")
    pipe = bed.load()
    for label, strategy, s in _cells(bed):
        cell(pipe, bed, label, strategy, s, Path(a.runs), True)


if __name__ == "__main__":
    main()
