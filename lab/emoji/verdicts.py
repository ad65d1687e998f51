"""Every sampler verdict of the pack again, on the emoji model's TEST prompts:
``python -m lab.emoji.verdicts [--model DIR | --checkpoint CKPT] --prompts N``.

Prompts: ``--prompts`` test-split scenes (categories in turn, spec seed `TEST_SEED`), item i
generated with seed SEED0 + i by every setting; the judge (``cache/judge``, never trained on
model samples) scores every picture. Nothing here is tuned on the test prompts: the tuned LADR
setting and the calibration use ``--val-prompts`` validation-split scenes only.

The gate first: baseline-64 on the test prompts; when it passes less than ``--gate`` (the issue's
0.6) of the single-object ones, the script does not compare samplers on a model that cannot
draw: it writes the checkpoint's learning curve, baseline-64's figures and the refusal, and
stops. Past the gate, one results file with the commit and machine:

* ``t2i``: the official sampler at --steps (64) and at each setting's forwards; LADR with the
  paper's policy, `nano`, `adaptive` and the setting tuned on validation (``--tune``: the best
  validation pass rate, fewer forwards on a tie); nano's picks of ``ladr-global``,
  ``halton-ladr``, ``threshold``, ``entropy``; ML-Cache's `ladr` on LADR; the calibration's
  recommendation (``ladr_core.calibrate`` on the validation captions), all with
  lab.studies.quality's paired, stratified 95 % intervals;
* ``i2i``: image to image at 0.25 / 0.5 / 0.75 by two routes: ``picture`` (OpenMoji pictures of
  the test prompts, a style the model never saw, through the VQ encoder: the route a user
  takes) and ``token`` (the model's own baseline-64 picture of each prompt, started from the
  tokens it was sampled with: what an encoder that inverts the decoder would give); per route
  baseline-64, ladr-nano, ladr-global and the official sampler at each one's forwards;
* ``inpaint``: one object of each OpenMoji picture regenerated (its box and a token around it),
  the same settings;
* ``understanding``: not run (no understanding checkpoint yet), said so in the file.

``--sections`` runs some of t2i / i2i / inpaint (the gate always), so two processes can share
two cores; ``--merge A.json B.json --json OUT`` then writes the one document, refusing runs that
differ in anything but their sections.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from lab.benchmarks.common import json_text, save_png
from lab.emoji import verdict_runs as R
from lab.emoji.judge import Judge
from lab.emoji.results import provenance
from lab.emoji.scenes import (
    CATEGORIES,
    TEST_SEED,
    TEST_STYLE,
    VAL_SEED,
    Scene,
    prompt_scenes,
    render,
)
from lab.studies import rivals
from lab.studies.paired_stats import group_index, scores

ROOT = Path(__file__).resolve().parents[2]
SEED0 = 100_000
GATE = 0.6
SHEET = 10
STRENGTHS = (0.25, 0.5, 0.75)
TUNE = ("ladr:tau=0.7,steps=64", "ladr:tau=0.8,steps=64", "ladr:tau=0.9,steps=64")
SECTIONS = ("t2i", "i2i", "inpaint")
ROUTES = ("picture", "token")
SECTION_KEYS = ("tuned", "calibration", "t2i", "i2i", "inpaint")
"""What each section adds to the document (t2i brings the tuning and the calibration)."""


def gate(first: dict[str, Any], scenes: list[Scene], threshold: float) -> dict[str, Any]:
    """baseline-64's pass rate on the single-object prompts against `threshold`."""
    single = [i for i, sc in enumerate(scenes) if sc.spec.category == "single_object"]
    rate = float(np.mean(first["passed"][single])) if single else float("nan")
    ok = bool(single) and rate >= threshold
    msg = (f"baseline-64 passes {rate:.2f} of {len(single)} single-object test prompts "
           f"(gate {threshold}): " + ("samplers compared" if ok else
                                     "below the gate, so no sampler is compared on this "
                                     "checkpoint (a model that cannot draw says nothing of a "
                                     "sampler); train further and run again"))
    return {"single_object_prompts": len(single), "baseline_single_object": rate,
            "threshold": threshold, "passed": ok, "message": msg}


def tune(pipe: Any, judge: Judge, settings: list[str], val: list[Scene],
         opts: dict[str, Any]) -> dict[str, Any]:
    """Each setting string on the validation scenes; the pick: best pass rate, fewer NFE on a
    tie."""
    gidx = group_index([sc.spec.category for sc in val])
    rows = {}
    for s in settings:
        run = R.run_t2i(pipe, judge, val, rivals.table_entry(s), opts["cfg"], opts["seed0"],
                        opts["batch"])
        rows[s] = {"score_overall": scores(run["passed"], gidx)["overall"],
                   "nfe_mean": float(run["nfe"].mean())}
    pick = max(rows, key=lambda s: (rows[s]["score_overall"], -rows[s]["nfe_mean"]))
    return {"validation_prompts": len(val), "settings": rows, "pick": pick}


def calibrate_on(pipe: Any, folder: Path, val: list[Scene], opts: dict[str, Any]
                 ) -> tuple[dict[str, Any], tuple[Any, int]]:
    """The product's calibration on the validation captions: (what it said, its pick)."""
    from ladr_core.calibrate import calibrate, calibrated_strategy

    with tempfile.TemporaryDirectory(prefix="emoji_cal_") as tmp:
        beside = Path(tmp) / "calibration.json"
        report = calibrate(pipe, folder, Path(tmp) / "report.json",
                           list(dict.fromkeys(sc.caption for sc in val)), steps=opts["steps"],
                           cfg=opts["cfg"], batch=opts["batch"], calibration_file=beside)
        strategy, steps, _ = calibrated_strategy(folder, beside)
    keep = ("recommended", "recommend_rule", "why", "warnings", "margin")
    return {k: report.get(k) for k in keep} | {"steps": steps}, (strategy, steps)


def i2i_section(pipe: Any, judge: Judge, scenes: list[Scene], gidx: np.ndarray,
                first: dict[str, Any], openmoji: torch.Tensor, opts: dict[str, Any],
                log: Any) -> dict[str, Any]:
    """Both routes at every strength (module docstring)."""
    from lab.studies.strength import sampled_codes

    own = torch.from_numpy(first["images"]).float() / 255.0
    tokens = torch.as_tensor(first["tokens"].astype(np.int64))
    routes = {"picture": {"pixels": openmoji, "view": pipe,
                          "codes": pipe.encode_image(openmoji).cpu()},
              "token": {"pixels": own, "view": sampled_codes(pipe, tokens), "codes": tokens}}
    out: dict[str, Any] = {}
    for route, src in routes.items():
        if route not in opts.get("routes", ROUTES):
            continue
        out[route] = {}
        for d in opts["strengths"]:
            out[route][str(d)] = R.i2i_route(pipe, judge, scenes, gidx, src, d, opts)
            log(f"i2i {route} {d}", "baseline-64", out[route][str(d)]["settings"]["baseline-64"])
    if "picture" in out:
        out["picture_codes_decoded"] = R.judged(
            judge, scenes, (pipe.decode(routes["picture"]["codes"], first["grid"]).float()
                            .clamp(0, 1) * 255).round().to(torch.uint8).numpy()).mean().item()
    return out


def curve(info: dict[str, Any]) -> dict[str, Any]:
    return {"step": info.get("step"), "loss": info.get("loss"),
            "history": info.get("history", [])}


def run(pipe: Any, judge: Judge, bank: Any, folder: Path, opts: dict[str, Any],
        log: Any = print) -> dict[str, Any]:
    """The whole harness on one loaded checkpoint (module docstring); returns the document."""
    scenes = prompt_scenes(opts["prompts"], "test", TEST_SEED)
    gidx = group_index([sc.spec.category for sc in scenes])
    ref = {"strategy": "baseline", "steps": opts["steps"]}
    first = R.run_t2i(pipe, judge, scenes, ref, opts["cfg"], opts["seed0"], opts["batch"])
    res = pipe.generate(scenes[0].caption, steps=1, seed=0, strategy="baseline")
    first["grid"] = res.grid
    doc: dict[str, Any] = {"prompts": {"test": len(scenes), "spec_seed": TEST_SEED,
                                       "seed0": opts["seed0"], "cfg": opts["cfg"],
                                       "captions": [sc.caption for sc in scenes]},
                           "gate": gate(first, scenes, opts["gate"]),
                           "baseline": {"steps": opts["steps"],
                                        "score": scores(first["passed"], gidx),
                                        "passed": first["passed"].tolist()}}
    doc["_sheet"] = first["images"][:SHEET]   # what baseline-64 draws: the refusal's evidence
    log("gate", doc["gate"]["message"], {})
    if not doc["gate"]["passed"]:
        return doc
    sections = opts.get("sections", SECTIONS)
    doc["sections"] = [x for sec in sections for x in (
        [f"i2i:{r}" for r in opts.get("routes", ROUTES)] if sec == "i2i" else [sec])]
    if "t2i" in sections:
        val = prompt_scenes(opts["val_prompts"], "validation", VAL_SEED)
        doc["tuned"] = tune(pipe, judge, list(opts["tune"]), val, opts)
        doc["calibration"], picked = calibrate_on(pipe, folder, val, opts)
        table = R.t2i_table(opts["steps"], doc["tuned"]["pick"], picked)
        doc["t2i"] = R.t2i_section(pipe, judge, scenes, gidx, first, table, opts, log)
    openmoji = torch.from_numpy(np.stack([render(bank, TEST_STYLE, sc.placed)
                                          for sc in scenes])).float() / 255.0
    if "i2i" in sections:
        doc["i2i"] = i2i_section(pipe, judge, scenes, gidx, first, openmoji, opts, log)
    if "inpaint" in sections:
        doc["inpaint"] = R.inpaint_section(pipe, judge, scenes, gidx, openmoji, opts)
    doc["understanding"] = "not run: no understanding checkpoint yet (the understanding task is not built)"
    return doc


def merge(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """One document from runs on the same checkpoint and prompts that each ran some of the
    sections (``--sections`` / ``--routes``, e.g. processes on two cores): everything but the
    sections must agree (prompts, guidance, gate, baseline-64's verdicts, checkpoint); the
    commit each section ran at is kept (``section_commits``), with each run's machine."""
    same = ("prompts", "gate", "baseline", "checkpoint", "uncommitted_emoji_code")
    first = docs[0]
    for d in docs[1:]:
        for key in same:
            if d.get(key) != first.get(key):
                raise SystemExit(f"error: the runs differ in {key!r}: merge only runs of one "
                                 "checkpoint, commit and prompt set")
    taken = [s for d in docs for s in d.get("sections", [])]
    if sorted(taken) != sorted(set(taken)):
        raise SystemExit(f"error: a section was run twice ({taken}); merge disjoint runs")
    out = {k: v for k, v in first.items() if k not in SECTION_KEYS}
    for d in docs:
        out.update({k: d[k] for k in SECTION_KEYS if k in d and k != "i2i"})
        if "i2i" in d:
            out["i2i"] = {**out.get("i2i", {}), **d["i2i"]}
    out["sections"] = [s for s in (*SECTIONS, *(f"i2i:{r}" for r in ROUTES)) if s in taken]
    out["section_commits"] = {s: d["env"]["git_commit"] for d in docs
                              for s in d.get("sections", [])}
    out["command"] = [d["command"] for d in docs]
    out["env_of_each_run"] = [d["env"] for d in docs]
    return out


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--model", default=None, help="model folder (default: the cache's)")
    src.add_argument("--checkpoint", default=None, help="a training checkpoint "
                     "(runs/transformer_ckpt.pt), exported to a temporary folder first")
    ap.add_argument("--prompts", type=int, default=250, help="test prompts (categories in turn)")
    ap.add_argument("--val-prompts", type=int, default=40, help="validation prompts (tuning)")
    ap.add_argument("--steps", type=int, default=64, help="the official sampler's T")
    ap.add_argument("--cfg", type=float, default=None,
                    help="default: --guidance's pick, else the model's default_cfg")
    ap.add_argument("--guidance", default=None, help="a lab.emoji.guidance results file: its "
                    "validation-tuned scale (it must be of the same checkpoint)")
    ap.add_argument("--batch", type=int, default=25)
    ap.add_argument("--gate", type=float, default=GATE)
    ap.add_argument("--tune", default=";".join(TUNE), help="';'-separated rivals settings")
    ap.add_argument("--strengths", default=",".join(map(str, STRENGTHS)))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--sections", default=",".join(SECTIONS),
                    help="the sections this run measures (the gate always): split them over "
                    "processes, then --merge the files")
    ap.add_argument("--routes", default=",".join(ROUTES),
                    help="i2i: the routes this run measures (split them over processes too)")
    ap.add_argument("--merge", nargs="+", default=None, metavar="FILE",
                    help="write one document (--json) from runs of disjoint --sections")
    ap.add_argument("--json", default=str(ROOT / "lab" / "results" / "emoji_verdicts.json"))
    a = ap.parse_args(argv)
    a.sections = [x for x in a.sections.split(",") if x]
    a.routes = [x for x in a.routes.split(",") if x]
    if not a.routes or set(a.routes) - set(ROUTES):
        ap.error(f"--routes: a comma-separated subset of {','.join(ROUTES)}; got "
                 f"{','.join(a.routes)!r}")
    if not a.sections or set(a.sections) - set(SECTIONS):
        ap.error(f"--sections: a comma-separated subset of {','.join(SECTIONS)}; "
                 f"got {','.join(a.sections)!r}")
    if a.prompts < len(CATEGORIES) or a.val_prompts < 1 or a.batch < 1 or a.steps < 1:
        ap.error(f"--prompts must be >= {len(CATEGORIES)} (one per category); --val-prompts, "
                 "--batch and --steps >= 1")
    return a


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from lab.emoji.bank import load_bank
    from lab.emoji.guidance import opened_model, tuned_cfg
    from lab.emoji.judge_eval import judge_dir

    a = parse(argv)
    if a.merge:
        return merge_files([Path(f) for f in a.merge], Path(a.json))
    torch.set_num_threads(a.threads)
    with opened_model(a.model, a.checkpoint) as (pipe, folder, info):
        cfg = a.cfg
        if cfg is None and a.guidance:
            cfg = tuned_cfg(Path(a.guidance), info.get("step"))
        opts = {"prompts": a.prompts, "val_prompts": a.val_prompts, "steps": a.steps,
                "cfg": pipe.default_cfg if cfg is None else cfg, "batch": a.batch,
                "gate": a.gate, "seed0": SEED0, "tune": [s for s in a.tune.split(";") if s],
                "strengths": [float(s) for s in a.strengths.split(",")],
                "sections": a.sections, "routes": a.routes}
        pipe.default_cfg = opts["cfg"]   # the paths that take no cfg (image to image, painting)
        doc = run(pipe, Judge.load(judge_dir()), load_bank(), folder, opts,
                  lambda sec, name, r: print(f"{sec:14s} {name} {r.get('score_overall', '')}",
                                             flush=True))
    doc["prompts"]["cfg_source"] = ("--cfg" if a.cfg is not None else a.guidance if a.guidance
                                    else "the model's default_cfg")
    doc = {**provenance(), "command": "python -m lab.emoji.verdicts " + " ".join(
        sys.argv[1:] if argv is None else argv),
           "checkpoint": {"folder": str(a.model or ("exported " + str(a.checkpoint)
                                                    if a.checkpoint else folder)),
                          **curve(info)}, **doc}
    sheet = np.concatenate(list(doc.pop("_sheet")), axis=1)
    out = Path(a.json)
    save_png(Image.fromarray(sheet).resize((sheet.shape[1] * 3, sheet.shape[0] * 3),
                                           Image.NEAREST), out.with_name(out.stem + "_samples.png"))
    doc["samples"] = f"{out.stem}_samples.png: baseline-64's first {SHEET} test prompts"
    out.write_text(json_text(doc))
    print(doc["gate"]["message"], f"\nwrote {a.json}")
    return doc


def merge_files(files: list[Path], out: Path) -> dict[str, Any]:
    """`merge` of the files into `out`, with the first file's picture sheet beside it."""
    import json
    import shutil

    doc = merge([json.loads(f.read_text()) for f in files])
    sheet = files[0].with_name(files[0].stem + "_samples.png")
    if sheet.is_file() and sheet != out.with_name(out.stem + "_samples.png"):
        shutil.copyfile(sheet, out.with_name(out.stem + "_samples.png"))
    doc["samples"] = f"{out.stem}_samples.png: baseline-64's first {SHEET} test prompts"
    out.write_text(json_text(doc))
    print(f"merged {', '.join(map(str, files))} -> {out}")
    return doc


if __name__ == "__main__":
    main()
