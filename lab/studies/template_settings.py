"""Which sampler setting draws the shipped nano templates' prompts best: each candidate on each
template task, many seeds, judged by the nano evaluator.

    OMP_NUM_THREADS=1 nice -n 10 python -m lab.studies.template_settings --seeds 16 \
        --json lab/results/template_settings.json

A task is one prompt of one nano template's sampler with the pictures it starts from (the
inpainting template's masked picture, the outpainting template's padded one; none for text to
image): the template's API workflow (example_workflows/api/, every one whose loader loads the built-in
nano) with that sampler's prompt, run through the pack's nodes (lab/workflows/graph.py) with
batch_size = --seeds at seed 0, so item i draws with seed i, the seeds of tuning (the quality
test set draws from 100000 on: nothing here touches it). Tasks shared by several templates run
once. Each candidate replaces the sampler's rule (a DiMOO Sampling Rule; for LADR, with an LADR
Policy of the nano preset); every other widget stays the template's. Per task and candidate: the pass rate
over the seeds, and whether the template's own seed passes is left to the template test
(lab/tests/workflows/test_templates_pass.py).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path
from typing import Any

import lab.workflows.thumbnails  # noqa: F401  (installs the V3 stand-in outside ComfyUI)
from lab.benchmarks.common import env_info
from lab.workflows.graph import nano_templates, verdicts

ROOT = Path(__file__).resolve().parents[2]

CANDIDATES = {
    "ladr (nano preset)": {"strategy": "ladr", "policy": "nano", "steps": 128},
    "ladr-global": {"strategy": "ladr-global", "tau": -1.0, "steps": 256},
    "halton-ladr": {"strategy": "halton-ladr", "tau": -1.0, "steps": 128},
    "baseline-64": {"strategy": "baseline", "steps": 64},
}
"""The nano-tuned picks of each LADR kind (the preset; the rules at their tuned setting and
steps, lab/results/samplers_validation.json) and the official schedule at 64 steps."""

VALIDATION = {"ladr (nano preset)": "ladr:tau=0.9,steps=128",
              "ladr-global": "ladr-global:tau=0.95,steps=256",
              "halton-ladr": "halton-ladr:tau=0.95,steps=128"}
"""Each candidate's setting in samplers_validation.json (lab/studies/rivals.py setting strings;
the official schedule at 64 steps is not in it)."""


def _policy_node(preset: str) -> dict:
    from nodes import LADRPolicyNode

    fields = {i.id: i.default for i in LADRPolicyNode.define_schema().inputs}
    return {"class_type": "LADR_Policy", "inputs": {**fields, "preset": preset}}


SAMPLER = "LADR_DiMOOSampler2"
"""The templates' sampler node (DiMOO Sampler, fed by a DiMOO Sampling Rule and a canvas)."""


def paints(wf: dict, kw: dict) -> bool:
    """Whether a sampler's canvas is a DiMOO Paint Canvas (an image to inpaint / outpaint)."""
    link = kw.get("canvas")
    return bool(link) and wf[str(link[0])]["class_type"] == "LADR_PaintCanvas"


def tasks(extra: list[str] = ()) -> dict[str, dict]:
    """Task name -> (API workflow, sampler id): one per distinct (prompt, input pictures); each
    ``extra`` prompt as a text-to-image task (a prompt a template could show instead)."""
    out: dict[str, dict] = {}
    for path in nano_templates():
        wf = json.loads(path.read_text())
        for key, node in wf.items():
            if node["class_type"] != SAMPLER:
                continue
            kw = node["inputs"]
            lines = [x.strip() for x in kw["prompt"].splitlines() if x.strip()] \
                if kw["one_prompt_per_line"] else [kw["prompt"]]
            pictures = paints(wf, kw)
            strength = kw.get("denoise", 1.0)  # image to image: one task per strength
            at = f" at denoise {strength:g}" if strength != 1.0 else ""
            for line in lines:
                name = f"{'paint from ' + path.stem + ': ' if pictures else ''}{line}{at}"
                out.setdefault(name, {"wf": wf, "sampler": key, "prompt": line,
                                      "templates": []})["templates"].append(path.stem)
    text = next(t for name, t in out.items() if not name.startswith("paint from "))
    for line in extra:
        out.setdefault(line, {**text, "prompt": line, "templates": []})
    return out


def _canvas(wf: dict, kw: dict, seeds: int) -> dict:
    """The sampler's canvas (a copy) with batch_size = seeds; a DiMOO Canvas at the checkpoint's
    default size without one."""
    link = kw.get("canvas")
    node = copy.deepcopy(wf[str(link[0])]) if link else \
        {"class_type": "LADR_Canvas", "inputs": {"width": 0, "height": 0}}
    node["inputs"]["batch_size"] = seeds
    return node


def variant(task: dict, candidate: dict, seeds: int) -> dict:
    """The task's workflow: its sampler with the candidate's rule (a DiMOO Sampling Rule, with
    an LADR Policy for the preset), its canvas at batch_size = seeds, seed 0, and only that
    sampler's VQ Decode."""
    wf = copy.deepcopy(task["wf"])
    key = task["sampler"]
    kw = wf[key]["inputs"]
    kw.update(prompt=task["prompt"], one_prompt_per_line=False, seed=0)
    if "steps" in candidate:
        kw["steps"] = candidate["steps"]
    wf["canvas"] = _canvas(wf, kw, seeds)
    wf["rule"] = {"class_type": "LADR_SamplingRule", "inputs": {
        "strategy": candidate["strategy"], "tau": candidate.get("tau", -1.0), "gamma": -1.0,
        "token": "sample"}}
    if "policy" in candidate:
        wf["policy"] = _policy_node(candidate["policy"])
        wf["rule"]["inputs"]["policy"] = ["policy", 0]
    kw.update(canvas=["canvas", 0], rule=["rule", 0])
    for k in [k for k, n in wf.items() if n["class_type"] == "LADR_DiMOOVQDecode"
              and n["inputs"]["tokens"][0] != key]:
        del wf[k]
    return wf


def measure(seeds: int, extra: list[str], only_extra: bool = False,
            templates: tuple[str, ...] = (), candidates: tuple[str, ...] = ()
            ) -> dict[str, Any]:
    """Every task (``templates``: only those of these templates) by every candidate (or those
    named in ``candidates``)."""
    from nodes import host

    host.send_event = lambda event, payload: None  # no server to tell
    rows = {}
    for name, task in tasks(extra).items():
        if (only_extra and task["templates"]) or \
                (templates and not set(templates) & set(task["templates"])):
            continue
        rows[name] = {"templates": task["templates"], "candidates": {}}
        for cand, setting in CANDIDATES.items():
            if candidates and cand not in candidates:
                continue
            start = time.perf_counter()
            got = verdicts(variant(task, setting, seeds))
            passed = [v["passed"] for v in got]
            rows[name]["candidates"][cand] = {
                "setting": setting, "pass_rate": sum(passed) / len(passed), "passed": passed,
                "wall_s": round(time.perf_counter() - start, 1)}
            print(f"{name:60s} {cand:20s} {sum(passed):2d}/{len(passed)}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=16, help="seeds 0..N-1 per task")
    ap.add_argument("--json", type=Path, default=None, help="write the results here")
    ap.add_argument("--extra", default="", help="';'-separated prompts a template could show "
                    "instead, measured as text-to-image tasks")
    ap.add_argument("--only-extra", action="store_true", help="measure the --extra prompts only")
    ap.add_argument("--templates", default="", help="','-separated API names: measure only "
                    "their tasks (e.g. a new template)")
    ap.add_argument("--candidates", default="", help="','-separated candidate names: "
                    f"measure only these (default: all of {list(CANDIDATES)})")
    args = ap.parse_args(argv)
    extra = [x.strip() for x in args.extra.split(";") if x.strip()]
    only = tuple(x.strip() for x in args.templates.split(",") if x.strip())
    cands = tuple(x.strip() for x in args.candidates.split(",") if x.strip())
    if set(cands) - set(CANDIDATES):
        ap.error(f"--candidates: pick from {list(CANDIDATES)}")
    rows = measure(args.seeds, extra, args.only_extra, only, cands)
    shown = [r for r in rows.values() if r["templates"]]  # the templates' own tasks
    totals = {c: sum(r["candidates"][c]["pass_rate"] for r in shown) / len(shown)
              for c in cands or CANDIDATES} if shown else {}  # --only-extra: no template task
    for c, t in totals.items():
        print(f"mean pass rate over the {len(shown)} template tasks: {c:20s} {t:.3f}")
    if args.json:
        doc = {"benchmark": "template_settings", "env": env_info(),
               "meta": {"seeds": args.seeds, "command": " ".join(sys.argv)},
               **({"mean_pass_rate": totals} if totals else {}), "tasks": rows}
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
