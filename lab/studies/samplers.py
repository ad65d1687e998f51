"""Training-free rival samplers at matched forwards on DiMOO-nano: tuning on the validation set.

Two passes: a scan of the grids (`GRIDS`) on the first 36 validation prompts finds where each
rival's NFE lands, then the settings near each budget (`near`) run on more prompts:

    python -m lab.studies.samplers --prompts 36 --grid all,more \
        --json lab/results/samplers_scan36.json
    python -m lab.studies.samplers --prompts 144 --grid "" \
        --near lab/results/samplers_scan36.json \
        --json lab/results/samplers_validation.json

Runs setting strings (lab/studies/rivals.py: `threshold:tau=0.9,steps=32`, ...) on the
*validation* prompts (lab.nano.scenes.validation_specs, item i seed i) with lab/studies/quality.py's
machinery (chunked batches, each image equal to its own single run; runs stored per chunk in
<--runs>/validation.npz, lab.studies.run_store, and reused when the arguments are equal) and scores them with lab.nano.evaluator. The JSON
accumulates: a setting already in it is kept unless run again. `picks`: for each rival (the
registered strategy name) and budget (12 and 18 forwards per image), the setting with the best
overall score among those whose mean NFE is within `BAND` of the budget (ties: fewer forwards);
for the ablation of LADR's frontier, `ladr-global-eq<budget>`: the LADR-without-locality setting
whose NFE is closest to the `ladr-n<budget>` pick's (when it is not `ladr-global-n<budget>`).
The test-set and painting runs of the picks: lab/studies/quality.py and lab/studies/painting.py
(table names `<rival>-n<budget>`, lab/studies/rivals.PICKS).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lab.benchmarks.common import env_info, json_text
from lab.nano import scenes
from lab.studies import quality
from lab.studies.paired_stats import group_index
from lab.studies.rivals import parse_setting, table_entry
from lab.studies.run_store import set_file
from ladr_core import load_dimoo, nano_model_path

ROOT = Path(__file__).resolve().parents[2]

BUDGETS = (12, 18)
BAND = 1.0
RIVALS = ("threshold", "entropy", "halton", "threshold-frontier", "ladr", "ladr-global",
          "halton-ladr")


def _grid(name: str, values: dict[str, list[Any]]) -> list[str]:
    """Setting strings: every combination of `values` (key -> list) for strategy `name`."""
    out = [""]
    for key, options in values.items():
        out = [f"{o},{key}={v}" if o else f"{key}={v}" for o in out for v in options]
    return [f"{name}:{o}" for o in out]


GRIDS: dict[str, list[str]] = {
    "baseline": _grid("baseline", {"steps": [11, 12, 13, 17, 18, 19]}),
    "threshold": _grid("threshold", {"tau": [0.8, 0.85, 0.9, 0.93, 0.95, 0.97, 0.98, 0.99],
                                     "token": ["sample"], "steps": [32]})
    + _grid("threshold", {"tau": [0.7, 0.9], "token": ["argmax"], "steps": [32]}),
    "entropy": _grid("entropy", {"gamma": [0.03, 0.1, 0.3, 1, 3, 10],
                                 "token": ["sample"], "steps": [32]})
    + _grid("entropy", {"gamma": [1], "token": ["argmax"], "steps": [32]}),
    "halton": _grid("halton", {"steps": [12, 18]}),
    "threshold-frontier": _grid("threshold-frontier", {"tau": [0.5, 0.7, 0.8, 0.9],
                                                       "token": ["sample"], "steps": [32]}),
    "ladr": _grid("ladr", {"tau": [0.6, 0.7, 0.8, 0.9], "steps": [64, 96, 128, 192]}),
    "ladr-global": _grid("ladr-global", {"tau": [0.9, 0.95, 0.97, 0.99],
                                         "steps": [96, 128, 192, 256]}),
    "halton-ladr": _grid("halton-ladr", {"tau": [0.9, 0.95, 0.97, 0.99],
                                         "steps": [96, 128, 192, 256]}),
}
# second pass, after the first showed where each rival's NFE lands (gaps around 12 and 18)
GRIDS["more"] = [
    *_grid("entropy", {"gamma": [0.5, 0.7, 1.5, 2], "token": ["sample"], "steps": [32]}),
    *_grid("threshold-frontier", {"tau": [0.3, 0.4, 0.75, 0.85], "token": ["sample"],
                                  "steps": [32]}),
    *_grid("threshold", {"tau": [0.92, 0.94], "token": ["sample"], "steps": [32]}),
    *_grid("ladr", {"tau": [0.8, 0.9], "steps": [48]}),
    *_grid("ladr", {"tau": [0.5], "steps": [96, 128]}),
    *_grid("ladr", {"tau": [0.95], "steps": [96, 128]}),
    *_grid("halton-ladr", {"tau": [0.995, 0.999], "steps": [256, 512, 1024]}),
    # HaltonLADR above T = 256 is the same run: its standard selection then commits one token
    # per step whatever T (the floor of the schedule's count); tau alone sets the NFE
    *_grid("halton-ladr", {"tau": [0.997, 0.998], "steps": [256]}),
    *_grid("entropy", {"gamma": [0.6], "token": ["sample"], "steps": [32]}),
]


def near(scan: dict[str, Any], width: float = 1.5, most: int = 3) -> list[str]:
    """Settings of a scan (a JSON of this script on fewer prompts) worth running on more: per
    rival and budget the `most` settings whose mean NFE is closest to the budget, within
    `width`; and the baseline at each budget."""
    out = [f"baseline:steps={b}" for b in BUDGETS]
    for rival in RIVALS:
        for budget in BUDGETS:
            close = sorted((abs(s["nfe_mean"] - budget), spec)
                           for spec, s in scan["settings"].items()
                           if s["rival"] == rival and abs(s["nfe_mean"] - budget) <= width)
            out += [spec for _, spec in close[:most] if spec not in out]
    return out


def run_setting(pipe: Any, spec: str, specs: list, captions: list[str], runs: Path,
                batch: int, cfg: float, reuse: str, gidx: np.ndarray,
                real: np.ndarray) -> dict[str, Any]:
    """One setting over the prompts: NFE, scores and per-item results (no images)."""
    args = table_entry(spec)
    parts = []
    store = (set_file(runs, "validation"), spec.replace(":", "_").replace(",", "_").replace("=", ""))
    for lo in range(0, len(captions), batch):
        hi = min(lo + batch, len(captions))
        run = quality.run_chunk(pipe, store, reuse, specs[lo:hi], lo, 0, args, cfg, 1.0)
        parts.append(run)
    out = quality.summarise(quality._merge(parts), args, gidx, real)
    out.pop("_images")
    out.pop("token_forwards")
    return out | {"rival": parse_setting(spec)["name"]}


def picks(settings: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """`<rival>-n<budget>` -> the pick (module docstring), for every rival with a setting in the
    budget's band."""
    out = {}
    for rival in RIVALS:
        for budget in BUDGETS:
            near = [(s["score_overall"], -s["nfe_mean"], spec) for spec, s in settings.items()
                    if s["rival"] == rival and abs(s["nfe_mean"] - budget) <= BAND]
            if near:
                score, neg_nfe, spec = max(near)
                out[f"{rival}-n{budget}"] = {"setting": spec, "nfe_mean": -neg_nfe,
                                             "score_overall": score}
    for budget in BUDGETS:  # the ablation: no locality at LADR's own NFE
        ladr = out.get(f"ladr-n{budget}")
        if ladr is None:
            continue
        gap, spec = min(((abs(s["nfe_mean"] - ladr["nfe_mean"]), spec)
                         for spec, s in settings.items() if s["rival"] == "ladr-global"),
                        default=(float("inf"), None))
        if gap <= BAND and spec != out.get(f"ladr-global-n{budget}", {}).get("setting"):
            s = settings[spec]
            out[f"ladr-global-eq{budget}"] = {"setting": spec, "nfe_mean": s["nfe_mean"],
                                              "score_overall": s["score_overall"]}
    return out


def markdown(doc: dict[str, Any]) -> str:
    lines = ["| setting | NFE | overall (validation) |", "|---|---:|---:|"]
    rows = sorted(doc["settings"].items(), key=lambda kv: (kv[1]["rival"], kv[1]["nfe_mean"]))
    lines += [f"| `{spec}` | {s['nfe_mean']:.1f} | {s['score_overall']:.3f} |"
              for spec, s in rows]
    lines += ["", f"Picks (best overall within {BAND:g} NFE of each budget):", "",
              "| name | setting | NFE | overall |", "|---|---|---:|---:|"]
    lines += [f"| {k} | `{p['setting']}` | {p['nfe_mean']:.1f} | {p['score_overall']:.3f} |"
              for k, p in doc["picks"].items()]
    m = doc["meta"]
    lines += ["", f"Validation prompts: {m['prompts']} (validation_specs, item i seed i), cfg "
              f"{m['cfg']}, temperature 1.0, batch {m['batch']}, {m['threads']} thread(s)."]
    return "\n".join(lines) + "\n"


def save(doc: dict[str, Any], out: Path) -> None:
    """The picks taken again, the environment, and the JSON with its markdown table."""
    doc["env"] = env_info()
    doc["picks"] = picks(doc["settings"])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json_text(doc))
    out.with_suffix(".md").write_text(markdown(doc))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", type=int, default=288)
    ap.add_argument("--grid", default="all", help=f"comma list of {list(GRIDS)} or 'all'")
    ap.add_argument("--settings", default="", help="extra setting strings, ';' separated")
    ap.add_argument("--near", default="", help="a scan's JSON: also run its settings near "
                    "each budget (`near`)")
    ap.add_argument("--list", action="store_true", help="print the settings this command would "
                    "run (one per line) and stop")
    ap.add_argument("--batch", type=int, default=36)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reuse", choices=("no", "yes"), default="yes")
    ap.add_argument("--runs", default=str(ROOT / "runs" / "samplers_validation"))
    ap.add_argument("--json", default=str(ROOT / "lab" / "results"
                                          / "samplers_validation.json"))
    a = ap.parse_args(argv)
    grids = list(GRIDS) if a.grid == "all" else [g for g in a.grid.split(",") if g]
    bad = sorted(set(grids) - set(GRIDS))
    if bad or a.prompts <= 0:
        ap.error(f"--grid: unknown {bad}" if bad else "--prompts must be > 0")
    todo = [s for g in grids for s in GRIDS[g]] + [s for s in a.settings.split(";") if s]
    if a.near:
        todo += [s for s in near(json.loads(Path(a.near).read_text())) if s not in todo]
    for spec in todo:
        table_entry(spec)  # a bad setting fails before any work
    if a.list:
        print("\n".join(todo))
        return {"settings": dict.fromkeys(todo)}
    out = Path(a.json)
    doc = json.loads(out.read_text()) if out.exists() else {"settings": {}}
    if doc.get("meta", {}).get("prompts", a.prompts) != a.prompts:
        ap.error(f"{out} holds {doc['meta']['prompts']} prompts; pass --prompts "
                 f"{doc['meta']['prompts']} or another --json")
    command = "python -m lab.studies.samplers " + " ".join(sys.argv[1:] if argv is None
                                                           else argv)
    doc["meta"] = {"set": "validation", "prompts": a.prompts,
                   "cfg": doc.get("meta", {}).get("cfg"), "temperature": 1.0,
                   "batch": a.batch, "threads": a.threads, "budgets": list(BUDGETS),
                   "band": BAND,
                   "commands": doc.get("meta", {}).get("commands", []) + [command]}
    if todo:  # with nothing to run, the picks are only taken again from the settings held
        torch.set_num_threads(a.threads)
        pipe = load_dimoo(nano_model_path(), dtype=torch.float32)
        doc["meta"]["cfg"] = pipe.default_cfg
        specs = scenes.validation_specs(a.prompts)
        captions = [scenes.caption_for(s) for s in specs]
        gidx = group_index([scenes.group_of(s) for s in specs])
        real = np.array([pipe.make_denoiser(c, cfg=pipe.default_cfg).real_tokens
                         for c in captions])
    for spec in todo:
        doc["settings"][spec] = run_setting(pipe, spec, specs, captions, Path(a.runs), a.batch,
                                            pipe.default_cfg, a.reuse, gidx, real)
        s = doc["settings"][spec]
        print(f"{spec:55s} nfe={s['nfe_mean']:6.2f} overall={s['score_overall']:.3f}",
              flush=True)
        save(doc, out)
    save(doc, out)
    print(markdown(doc))
    return doc


if __name__ == "__main__":
    main()
