"""Quality per forward on both built-in models: every rule's pass rate against the forwards it
spends, at each `steps` of a grid, paired with the official sampler.

    OMP_NUM_THREADS=1 nice -n 19 python -m lab.studies.quality_per_forward run --model nano \
        --rules baseline,ladr [--steps 8,12] [--shard 0/2]
    python -m lab.studies.quality_per_forward_report    # results file + figure
    python -m lab.studies.quality_per_forward rules     # the rules, from the registry

Testbeds (`TESTBEDS`): ``nano`` = DiMOO-nano on its 490 test prompts (``lab.nano.scenes``'
``quality_test_specs``: the set the README's quality_test results use; item i seed 100000 + i),
scored by ``lab.nano.evaluator``; ``emoji`` = DiMOO-emoji on 250 TEST-split scenes
(``lab.emoji.verdicts.prompt_scenes(n, "test", TEST_SEED)``; item i seed 100000 + i), scored by
the emoji judge (``cache/judge``, never trained on model samples). Both at the model's default
CFG, temperature 1.0, through the public API only: ``load_dimoo(path).generate(captions,
steps=s, strategy=<name>, seed=...)``; the forwards of each image are the run's own count
(``GenerationResult.item_nfe``: the steps in which the image still had masked tokens).

Rules (`rules()`, from the code, no hand list): the official sampler (``baseline``), every
registered strategy whose default carries an ``LADRPolicy`` (``ladr`` with the paper's policy,
``ladr-global``, ``halton-ladr``) and every LADR preset that is a recipe of its own rather than
the paper's policy with one field changed (its ablations, ``delayed``, ``off``): ``nano``,
``adaptive``. A rule runs at each `steps` of `STEPS` as the user's ``steps``.

Store (resumable, splittable): one job = (testbed, rule, steps); its prompts run in chunks
(``--chunk``), each appended to ``<runs>/<testbed>/<rule>-s<steps>.npz`` (``run_store``: verdicts,
forwards, tokens) with a sidecar ``.json`` recording each chunk's commit, machine and time. A
re-run skips the stored chunks; processes given disjoint ``--rules`` / ``--steps`` or ``--shard
k/n`` (job k, k + n, ...) write disjoint files. ``--matched`` also runs the
official sampler at each finished rule's forwards (``matched_steps``) right after the rule, when
not run yet (give ``--matched`` to one process per testbed: two could write the same file).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lab.benchmarks.common import env_info
from lab.studies.run_store import load_chunk, save_chunk
from ladr_core import PRESETS, LADRPolicy, preset_names, resolve_strategy, strategy_names

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "lab" / "results" / "quality_per_forward_runs"
STEPS = (8, 12, 16, 24, 32, 48, 64)
REFERENCE_STEPS = 64
SEED0 = 100_000
ROUNDING = ("the official sampler at the same forwards runs steps = max(1, round(mean forwards "
            "per image)) (Python's round: the nearest integer, a tie .5 to the even one), on "
            "the same prompts with the same seeds")


@dataclass(frozen=True)
class Testbed:
    """A model with its test prompts and its judge. `judge(lo, images)`: bool [n], whether
    image j passes prompt lo + j."""

    name: str
    captions: list[str]
    groups: list[str]
    seed0: int
    prompts: str
    load: Callable[[], Any]
    judge: Callable[[int, np.ndarray], np.ndarray]


def nano_testbed(n: int = 490, split: str = "test") -> Testbed:
    from lab.nano.evaluator import score_images
    from lab.nano.scenes import caption_for, group_of, prompt_set
    from ladr_core import load_dimoo, nano_model_path

    specs, seed0 = prompt_set(split, n)

    def judge(lo: int, images: np.ndarray) -> np.ndarray:
        return np.array(score_images(specs[lo:lo + len(images)], list(images))["passed"], bool)

    return Testbed("nano", [caption_for(s) for s in specs], [group_of(s) for s in specs], seed0,
                   f"{n} nano test prompts (lab.nano.scenes.quality_test_specs)" if split == "test"
                   else f"{n} nano validation prompts (lab.nano.scenes.validation_specs)",
                   lambda: load_dimoo(nano_model_path(), dtype=torch.float32), judge)


def emoji_testbed(n: int = 250, split: str = "test") -> Testbed:
    from lab.emoji.judge import Judge
    from lab.emoji.judge_eval import judge_dir
    from lab.emoji.verdicts import TEST_SEED, VAL_SEED, prompt_scenes
    from ladr_core import emoji_model_path, load_dimoo

    spec_seed = TEST_SEED if split == "test" else VAL_SEED
    scenes = prompt_scenes(n, split, spec_seed)
    held: list[Any] = []

    def judge(lo: int, images: np.ndarray) -> np.ndarray:
        if not held:
            held.append(Judge.load(judge_dir()))
        return np.array([held[0].passes(sc.spec, img) for sc, img in
                         zip(scenes[lo:lo + len(images)], images, strict=True)], bool)

    return Testbed("emoji", [sc.caption for sc in scenes], [sc.spec.category for sc in scenes],
                   SEED0 if split == "test" else 0, f"{n} emoji {split.upper()}-split prompts "
                   f"(lab.emoji.verdicts.prompt_scenes, spec seed {spec_seed})",
                   lambda: load_dimoo(emoji_model_path(), dtype=torch.float32), judge)


TESTBEDS: dict[str, Callable[..., Testbed]] = {"nano": nano_testbed, "emoji": emoji_testbed}
DEFAULT_PROMPTS = {"nano": 490, "emoji": 250}
CHUNK = {"nano": 35, "emoji": 25}
"""Prompts per stored chunk (the report reads the store with these)."""


def _changed_fields(policy: LADRPolicy, paper: LADRPolicy) -> int:
    return sum(getattr(policy, f.name) != getattr(paper, f.name) for f in fields(LADRPolicy))


def rules() -> tuple[str, ...]:
    """``baseline``, the LADR rules of the registry and the presets that are recipes of their
    own (module docstring), in that order."""
    ladr = [n for n in strategy_names()
            if isinstance(getattr(resolve_strategy(n), "policy", None), LADRPolicy)]
    paper = PRESETS["paper"].policy
    recipes = [p for p in preset_names() if _changed_fields(PRESETS[p].policy, paper) > 1]
    return ("baseline", *ladr, *recipes)


def store_path(runs: Path, bed: str, rule: str, steps: int) -> Path:
    return runs / bed / f"{rule}-s{steps:02d}.npz"


def _key(rule: str, steps: int, cfg: float, seed0: int, lo: int, hi: int) -> str:
    return repr((rule, steps, cfg, seed0, lo, hi))


def run_chunk(pipe: Any, bed: Testbed, rule: str, steps: int, lo: int, hi: int,
              strategy: Any = None) -> dict[str, Any]:
    """Prompts lo..hi-1 under one rule (or `strategy`, an object standing for it): verdicts,
    forwards, tokens, first images, wall time."""
    start, cpu = time.perf_counter(), time.process_time()
    res = pipe.generate(bed.captions[lo:hi], steps=steps, seed=bed.seed0 + lo,
                        strategy=rule if strategy is None else strategy,
                        temperature=1.0)
    images = (res.images.float().clamp(0, 1) * 255).round().to(torch.uint8).numpy()
    n = len(images)
    return {"passed": bed.judge(lo, images), "nfe": np.asarray(res.item_nfe, np.int64),
            "token_forwards": np.full(n, res.token_forwards / n, np.float64),
            "tokens": res.tokens.cpu().numpy().astype(np.uint16), "images": images,
            "wall_s": time.perf_counter() - start, "cpu_s": time.process_time() - cpu}


def _note(path: Path, lo: int, hi: int, run: dict[str, Any], setting: str) -> None:
    """The sidecar record of a stored chunk: when, on which commit and machine, how long."""
    side = path.with_suffix(".json")
    doc = json.loads(side.read_text()) if side.is_file() else {"chunks": {}}
    env = env_info()
    doc["setting"] = setting
    doc["chunks"][str(lo)] = {"hi": hi, "commit": env["git_commit"], "utc": env["utc"],
                              "device": f"cpu: {env['processor']}" if not env["gpu"] else env["gpu"],
                              "torch_threads": env["torch_threads"],
                              "load_avg_1m": env.get("load_avg_1m"),
                              "wall_s": round(float(run["wall_s"]), 2),
                              "cpu_s": round(float(run["cpu_s"]), 2)}
    tmp = side.with_name(side.stem + ".partial.json")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, side)


def run_job(pipe: Any, bed: Testbed, rule: str, steps: int, runs: Path, chunk: int,
            log: Callable[[str], None] = print) -> int:
    """Every chunk of one (testbed, rule, steps) job not stored yet; returns chunks generated."""
    path, name, cfg = store_path(runs, bed.name, rule, steps), f"{rule}@{steps}", pipe.default_cfg
    made = 0
    for lo in range(0, len(bed.captions), chunk):
        hi = min(lo + chunk, len(bed.captions))
        key = _key(rule, steps, cfg, bed.seed0, lo, hi)
        if load_chunk(path, name, lo, key) is not None:
            continue
        run = run_chunk(pipe, bed, rule, steps, lo, hi)
        save_chunk(path, name, lo, key, run)
        _note(path, lo, hi, run, repr(resolve_strategy(rule)))
        made += 1
        log(f"{bed.name} {name:22s} [{hi}/{len(bed.captions)}] nfe={run['nfe'].mean():6.2f} "
            f"pass={run['passed'].mean():.2f} {run['wall_s']:.1f}s")
    return made


def finished(runs: Path, bed: Testbed, rule: str, steps: int, chunk: int,
             cfg: float) -> dict[str, np.ndarray] | None:
    """The job's per-prompt fields when every chunk of the prompts is stored, else None."""
    path, parts = store_path(runs, bed.name, rule, steps), []
    for lo in range(0, len(bed.captions), chunk):
        hi = min(lo + chunk, len(bed.captions))
        part = load_chunk(path, f"{rule}@{steps}", lo, _key(rule, steps, cfg, bed.seed0, lo, hi))
        if part is None:
            return None
        parts.append(part)
    return {f: np.concatenate([p[f] for p in parts]) for f in ("passed", "nfe")}


def matched_steps(nfe_mean: float) -> int:
    """The official sampler's steps at a rule's forwards (`ROUNDING`)."""
    return max(1, round(nfe_mean))


def jobs(rule_list: list[str], steps: list[int], shard: tuple[int, int]) -> list[tuple[str, int]]:
    """(rule, steps) in the order they run: the official sampler at 64 steps first (every
    row's reference), then the cheapest steps first, so a cut-off run leaves whole curves' low
    ends; job k, k + n, ... of shard k/n."""
    order = sorted(((r, s) for s in steps for r in rule_list),
                   key=lambda j: (j != ("baseline", REFERENCE_STEPS), j[1]))
    return order[shard[0]::shard[1]]


def throughput(bed: Testbed, rule_list: list[str], steps: list[int], n: int,
               log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Images per CPU second and CPU seconds per image-forward of each rule at each steps on
    the first `n` prompts, one thread (the judge's time included, as in a run; CPU time of the
    process, so other jobs on a shared machine do not inflate it); nothing stored."""
    pipe, out = bed.load(), []
    run_chunk(pipe, bed, "baseline", 2, 0, min(n, 2))   # warm-up
    for rule in rule_list:
        for s in steps:
            run = run_chunk(pipe, bed, rule, s, 0, n)
            row = {"model": bed.name, "rule": rule, "steps": s, "prompts": n,
                   "forwards_mean": float(run["nfe"].mean()),
                   "images_per_cpu_s": round(n / run["cpu_s"], 3),
                   "cpu_s_per_image_forward": round(run["cpu_s"] / float(run["nfe"].sum()), 5),
                   "wall_s": round(run["wall_s"], 2)}
            out.append(row)
            log(json.dumps(row))
    return out


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("command", choices=("run", "rules", "throughput"))
    ap.add_argument("--model", choices=tuple(TESTBEDS), default="nano", help="run: the testbed")
    ap.add_argument("--rules", default="all", help="comma list of rules() names, or 'all'")
    ap.add_argument("--steps", default=",".join(map(str, STEPS)), help="comma list of steps")
    ap.add_argument("--prompts", type=int, default=None, help="default: 490 nano, 250 emoji")
    ap.add_argument("--chunk", type=int, default=None,
                    help="prompts per stored chunk (default CHUNK: 35 nano, 25 emoji)")
    ap.add_argument("--shard", default="0/1", help="k/n: run jobs k, k + n, ... of the list")
    ap.add_argument("--matched", action="store_true",
                    help="then run the official sampler at each finished rule's forwards")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", default=str(RUNS), help="the run store's folder")
    a = ap.parse_args(argv)
    known = rules()
    a.rules = list(known) if a.rules == "all" else [r for r in a.rules.split(",") if r]
    unknown = [r for r in a.rules if r not in known]
    if unknown:
        ap.error(f"--rules: unknown {unknown}; choose from {', '.join(known)} (or 'all')")
    try:
        a.steps = [int(s) for s in a.steps.split(",") if s]
        k, n = (int(x) for x in a.shard.split("/"))
    except ValueError:
        ap.error("--steps: comma-separated integers; --shard: k/n with 0 <= k < n")
    a.chunk = a.chunk or CHUNK[a.model]
    if not a.steps or min(a.steps) < 1 or not 0 <= k < n or a.chunk < 1:
        ap.error("--steps >= 1, --chunk >= 1, --shard k/n with 0 <= k < n")
    a.shard = (k, n)
    a.prompts = a.prompts or DEFAULT_PROMPTS[a.model]
    return a


def main(argv: list[str] | None = None) -> None:
    a = parse(argv)
    if a.command == "rules":
        print("\n".join(rules()))
        return
    torch.set_num_threads(a.threads)
    if a.command == "throughput":  # --prompts: per measurement (default 8)
        n = a.prompts if a.prompts != DEFAULT_PROMPTS[a.model] else 8
        rows = throughput(TESTBEDS[a.model](n), a.rules, a.steps, n)
        path = ROOT / "lab" / "results" / f"quality_per_forward_throughput_{a.model}.json"
        path.write_text(json.dumps({"env": env_info(), "rows": rows}, indent=1) + "\n")
        return
    bed, runs = TESTBEDS[a.model](a.prompts), Path(a.runs)
    pipe = bed.load()
    todo = jobs(a.rules, a.steps, a.shard)
    log = functools.partial(print, flush=True)
    for rule, steps in todo:
        run_job(pipe, bed, rule, steps, runs, a.chunk, log)
        done = finished(runs, bed, rule, steps, a.chunk, pipe.default_cfg)
        if a.matched and rule != "baseline" and done is not None:  # its same-forwards reference
            run_job(pipe, bed, "baseline", matched_steps(float(done["nfe"].mean())), runs,
                    a.chunk, log)

if __name__ == "__main__":
    main()
