"""Image to image by denoise strength on the shipped DiMOO-nano model: what a strength keeps, how
often the picture still (or newly) matches its prompt, what it costs per strategy, and which
tokens to re-mask.

    OMP_NUM_THREADS=1 nice -n 10 python -m lab.studies.strength --prompts 28 \
        --json lab/results/strength.json

Sources: the first ``--prompts`` prompts of nano's TEST set (``scenes.quality_test_specs``,
spec seed 9; never the tuning set), each drawn by text to image with the official sampler at 64
steps, image seed TEST_IMAGE_SEED + i. Each source picture is then redrawn by image to image
(``pipe.generate(prompt, image=source, denoise=d)``) at every strength d of ``--strengths``,
image seed TEST_IMAGE_SEED + i again, with two prompts:

* ``own``: the source's own caption; scored by the evaluator on the source's spec;
* ``changed``: the caption of the spec changed in one thing, made from the spec alone
  (``changed_spec``): a spec that names colours gets its first object's colour replaced by the
  next palette colour it does not name; one without colours gets its first object's shape
  replaced by the next shape it does not name (counting: every object's); scored on that spec.

Per run: the evaluator's verdicts (``overall`` = mean of the six GenEval groups, as every nano
study: lab.studies.paired_stats), the share of the picture's tokens kept (equal to the source's
codes, i.e. the VQ encoding of the source picture the run starts from), the share of the
drawing kept (``drawing_kept``: of the pixels drawn in either picture, those of the same
palette colour) and the forwards per image (the denoiser calls the image took part in, plus
any re-mask scoring passes).

Settings at each strength: ``baseline-64`` (the official sampler, 64 steps), ``ladr-nano`` (the
LADR nano preset at T = 128), ``ladr-global`` (at T = 256; ``SETTINGS``), each re-masking at random
(the product's default, as aMUSEd); ``baseline@<setting>``: the official sampler with T chosen
so that its forwards at that strength match the setting's mean (round(F / d)); and re-mask
variants of the official sampler at ``--remask-strengths``: ``baseline-64+least-likely-p<P>``
re-masks the tokens the model finds least likely under the run's prompt, each token scored by
the guided log probability of its source code with that token masked (P packed passes over
disjoint random token sets covering the picture, lab.studies.strength_measures.token_scores; P = 1
masks every token at once: the prompt alone judges), counting the P passes as forwards; and at
``--sampled-strengths`` ``baseline-64+sampled-codes``: the official sampler started from the
tokens each source was sampled with instead of the VQ encoding of its picture (what an encoder
that inverts the decoder would give), which tells the VQ round trip's share of a loss.
``compare``: paired, stratified bootstrap 95 % intervals (pass rate) and paired bootstrap
intervals (kept share) of each setting against baseline-64 and its matched baseline at the
same strength, and of each re-mask variant against random; the forwards ratio with its
interval.
"""

from __future__ import annotations

import argparse
import copy
import shlex
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lab.benchmarks.common import env_info, json_text, save_png
from lab.nano import scenes
from lab.nano.evaluator import score_images
from lab.studies.paired_stats import group_index, paired_bootstrap, ratio_ci, scores
from lab.studies.strength_measures import (
    changed_spec,
    drawing_kept,
    least_likely,
    mean_diff_ci,
    palette_labels,
    token_scores,
)
from ladr_core import load_dimoo, nano_model_path, resolve_strategy

ROOT = Path(__file__).resolve().parents[2]

STRENGTHS = (0.25, 0.5, 0.75)
SETTINGS = {"baseline-64": ("baseline", 64), "ladr-nano": ("nano", 128),
            "ladr-global": ("ladr-global", 256)}
"""Row name -> (strategy name or preset, T). A preset brings no T of its own (the run's steps
are its price), so each LADR row names the T it was tuned at and the committed results
(lab/results/strength*.json) ran it at: nano 128, ladr-global 256."""
PROMPTS = ("own", "changed")


# ---- runs --------------------------------------------------------------------------------------
def as_uint8(images: torch.Tensor) -> np.ndarray:
    return (images.float().clamp(0, 1) * 255).round().to(torch.uint8).numpy()


def make_sources(pipe: Any, captions: list[str], seed0: int, max_batch: int) -> dict[str, Any]:
    """Each caption's text-to-image picture (official sampler, 64 steps): images uint8, their
    palette labels, the codes an image-to-image run starts from (the VQ encoding of the
    picture), the share of them equal to the sampled tokens and the decode of those codes (the
    VQ round trip: what denoise 0 returns)."""
    res = pipe.generate(captions, steps=64, strategy="baseline", seed=seed0, max_batch=max_batch)
    pixels = res.images.float().clamp(0, 1)
    codes = pipe.encode_image(pixels)
    images = as_uint8(res.images)
    return {"images": images, "labels": palette_labels(images), "pixels": pixels,
            "codes": codes.cpu(), "tokens": res.tokens.cpu(), "nfe": res.item_nfe,
            "roundtrip": (codes.cpu() == res.tokens.cpu()).float().mean(1).numpy(),
            "roundtrip_images": as_uint8(pipe.decode(codes, res.grid))}


def run_i2i(pipe: Any, captions: list[str], pixels: torch.Tensor, strength: float,
            strategy: Any, steps: int | None, seed0: int, max_batch: int,
            remask: torch.Tensor | None = None) -> dict[str, Any]:
    """One image-to-image run over every picture: images uint8, tokens [B, N], forwards per
    image. ``remask``: BoolTensor [B, N] of the tokens to re-mask (None: the product's
    choice, at random). The product's path either way: ``prepare_paint`` without a mask (what
    ``generate(image=, denoise=)`` builds) run from the schedule's start step; a given
    ``remask`` replaces only the random draw."""
    from ladr_core import StepSchedule

    if remask is None:
        res = pipe.generate(captions, image=pixels, denoise=strength, steps=steps,
                            strategy=strategy, seed=seed0, max_batch=max_batch)
    else:
        job = pipe.prepare_paint(captions, pixels, None, denoise=strength)
        job = replace(job, plan=replace(job.plan, generate=remask))
        res = pipe.run(job, strategy, StepSchedule.of(steps, strength), seed=seed0,
                       max_batch=max_batch)
    return {"images": as_uint8(res.images), "tokens": res.tokens.cpu(), "nfe": res.item_nfe}


def remask_counts(steps: int, strength: float, shape: tuple[int, int]) -> list[int]:
    """Tokens the product re-masks in each picture at this strength (the official schedule's
    masked count at the start step of T = ``steps``)."""
    from ladr_core import StepSchedule
    from ladr_core.strength import remask_count

    return [remask_count(shape[1], StepSchedule(steps, strength).start, steps)] * shape[0]


# ---- scores ------------------------------------------------------------------------------------
def verdicts(specs: list, run: dict[str, Any], src: dict[str, Any], extra_forwards: int = 0,
             codes: str = "codes") -> dict[str, Any]:
    """A run's per-picture results: passed (evaluator on ``specs``), kept (share of tokens equal
    to the source's ``codes``: its VQ encoding, or the ``tokens`` it was sampled with), drawn
    (``drawing_kept``), nfe (its forwards plus ``extra_forwards`` each)."""
    kept = (run["tokens"].cpu() == src[codes]).float().mean(1).numpy()
    return {"passed": np.array(score_images(specs, list(run["images"]))["passed"], dtype=bool),
            "kept": kept, "drawn": drawing_kept(src["labels"], palette_labels(run["images"])),
            "nfe": np.asarray(run["nfe"], dtype=np.int64) + extra_forwards}


def row_json(per_prompt: dict[str, dict], steps: int, gidx: np.ndarray,
             wall: float) -> dict[str, Any]:
    """One setting's row: T, and per prompt kind the overall pass rate, mean kept share, mean
    forwards and the per-picture lists."""
    out: dict[str, Any] = {"steps": steps, "wall_s": round(wall, 1)}
    for kind, v in per_prompt.items():
        out[kind] = {"score_overall": scores(v["passed"], gidx)["overall"],
                     "kept_mean": float(v["kept"].mean()),
                     "drawn_mean": float(v["drawn"].mean()), "nfe_mean": float(v["nfe"].mean()),
                     "passed": v["passed"].tolist(),
                     "kept": [round(float(x), 4) for x in v["kept"]],
                     "drawn": [round(float(x), 4) for x in v["drawn"]],
                     "nfe": v["nfe"].tolist()}
    return out


def compare_rows(rows: dict[str, dict], pairs: list[tuple[str, str]], gidx: np.ndarray,
                 strength: float) -> list[dict[str, Any]]:
    """Paired comparisons a - b at one strength, per prompt kind: pass rate (stratified
    bootstrap, overall), kept share and the forwards ratio mean(b) / mean(a)."""
    out = []
    for a_name, b_name in pairs:
        a, b = rows[a_name], rows[b_name]
        for kind in PROMPTS:
            x, y = a[kind], b[kind]
            out.append({"strength": strength, "prompt": kind, "a": a_name, "b": b_name,
                        "pass_diff": paired_bootstrap(np.array(x["passed"]),
                                                      np.array(y["passed"]), gidx)["overall"],
                        "kept_diff": mean_diff_ci(np.array(x["kept"]), np.array(y["kept"])),
                        "drawn_diff": mean_diff_ci(np.array(x["drawn"]), np.array(y["drawn"])),
                        "nfe_ratio": ratio_ci(np.array(y["nfe"]), np.array(x["nfe"]))})
    return out


# ---- the study ---------------------------------------------------------------------------------
def run_setting(pipe: Any, ctx: dict[str, Any], strength: float, strategy: Any,
                steps: int | None, remask: dict[str, torch.Tensor] | None = None,
                extra_forwards: int = 0, codes: str | None = None
                ) -> tuple[dict[str, dict], int, float, dict]:
    """One setting at one strength with both prompts: (per prompt kind its verdicts, T, wall
    seconds, per prompt kind its images). ``codes`` (None: the study's, ``--codes``) "tokens":
    the run starts from the tokens each source was sampled with instead of its VQ encoding
    ("codes"; ``sampled_codes``)."""
    per, images, start = {}, {}, time.perf_counter()
    codes = codes or ctx["codes"]
    view = pipe if codes == "codes" else sampled_codes(pipe, ctx["src"]["tokens"])
    for kind in PROMPTS:
        run = run_i2i(view, ctx["captions"][kind], ctx["src"]["pixels"], strength, strategy,
                      steps, ctx["seed0"], ctx["max_batch"],
                      None if remask is None else remask[kind])
        per[kind] = verdicts(ctx["specs"][kind], run, ctx["src"], extra_forwards, codes)
        images[kind] = run["images"]
    return per, 64 if steps is None else steps, time.perf_counter() - start, images


def sampled_codes(pipe: Any, tokens: torch.Tensor) -> Any:
    """A view of ``pipe`` whose VQ encoder returns ``tokens`` [B, N] (the sources' sampled
    tokens) for the B source pictures: an encoder that inverts the decoder exactly, to tell
    what the VQ round trip costs an image-to-image run from what its re-masking does."""
    view = copy.copy(pipe)
    view.encode_image = lambda images: tokens.to(images.device)
    return view


def run_strength(pipe: Any, ctx: dict[str, Any], strength: float, settings: list[str],
                 passes: list[int], log: Any) -> tuple[dict[str, dict], list[dict]]:
    """Every setting at one strength (module docstring): rows and comparisons."""
    rows: dict[str, dict] = {}

    def add(name: str, strategy: Any, steps: int | None, **kw: Any) -> None:
        per, t, wall, images = run_setting(pipe, ctx, strength, strategy, steps, **kw)
        rows[name] = row_json(per, t, ctx["gidx"], wall)
        ctx["sheet"].setdefault((strength, name), images)
        log(strength, name, rows[name])

    for name in settings:
        strat, steps = SETTINGS[name]
        add(name, resolve_strategy(strat), steps)
    matched: dict[int, str] = {}
    for name in settings[1:]:
        forwards = np.mean([rows[name][k]["nfe_mean"] for k in PROMPTS])
        t = max(1, round(forwards / strength))
        if t in matched:
            rows[f"baseline@{name}"] = rows[matched[t]]
            continue
        matched[t] = f"baseline@{name}"
        add(f"baseline@{name}", resolve_strategy("baseline"), t)
    counts = remask_counts(64, strength, ctx["src"]["codes"].shape)
    for p in passes:
        remask = {kind: least_likely(token_scores(pipe, ctx["captions"][kind],
                                                  ctx["src"][ctx["codes"]],
                                                  p, ctx["seed0"]), counts, ctx["seed0"])
                  for kind in PROMPTS}
        add(f"baseline-64+least-likely-p{p}", resolve_strategy("baseline"), 64, remask=remask,
            extra_forwards=p)
    if strength in ctx["sampled_strengths"] and ctx["codes"] == "codes":
        add("baseline-64+sampled-codes", resolve_strategy("baseline"), 64, codes="tokens")
    pairs = [(n, settings[0]) for n in settings[1:]]
    pairs += [(n, f"baseline@{n}") for n in settings[1:]]
    pairs += [(f"baseline-64+least-likely-p{p}", "baseline-64") for p in passes]
    pairs += [(n, "baseline-64") for n in rows if n == "baseline-64+sampled-codes"]
    return rows, compare_rows(rows, pairs, ctx["gidx"], strength)


def sample_sheet(ctx: dict[str, Any], strengths: list[float], n: int = 7) -> np.ndarray:
    """uint8 sheet, one column per picture (the first n): the source, then the official
    sampler's redraws at each strength with the own prompt, then with the changed prompt."""
    src = ctx["src"]["images"][:n]
    bands = [src] + [ctx["sheet"][(d, "baseline-64")][kind][:n]
                     for kind in PROMPTS for d in strengths]
    return np.concatenate([np.concatenate(list(b), axis=1) for b in bands], axis=0)


# ---- output ------------------------------------------------------------------------------------
def _ci(c: dict[str, float], digits: int = 3) -> str:
    return f"{c['diff']:+.{digits}f} [{c['lo']:+.{digits}f}, {c['hi']:+.{digits}f}]"


def markdown(doc: dict[str, Any]) -> str:
    """The report's tables (docs/reports/STRENGTH.md shows them as they are here): per strength
    and setting the forwards per image (mean over both prompts) and per prompt the pass rate
    (overall), the tokens kept and the drawing kept; then the paired comparisons."""
    src = doc["source"]
    start = ("the tokens each source was sampled with" if doc["meta"].get("codes") == "sampled"
             else "the VQ encoding of each source picture (+sampled-codes: the tokens it was "
             "sampled with)")
    lines = [f"Pictures: {doc['meta']['prompts']} test prompts; every run starts from {start}. "
             f"Sources: pass rate "
             f"{src['score_overall']:.3f}; their VQ round trip (what denoise 0 returns) keeps "
             f"{src['roundtrip_mean']:.3f} of the sampled tokens and passes "
             f"{src['roundtrip_overall']:.3f}.", "",
             "| strength | setting | T | forwards / image | own: pass | own: tokens kept | own: "
             "drawing kept | changed: pass | changed: tokens kept | changed: drawing kept |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for d, rows in doc["strengths"].items():
        for name, r in rows.items():
            nfe = np.mean([r[k]["nfe_mean"] for k in PROMPTS])
            lines.append(f"| {d} | {name} | {r['steps']} | {nfe:.1f} | " + " | ".join(
                f"{r[k]['score_overall']:.3f} | {r[k]['kept_mean']:.3f} | "
                f"{r[k]['drawn_mean']:.3f}" for k in PROMPTS) + " |")
    lines += ["", "| strength | comparison | prompt | pass diff [95 % CI] | tokens kept diff "
              "[95 % CI] | drawing kept diff [95 % CI] | forwards ratio [95 % CI] |",
              "|---:|---|---|---:|---:|---:|---:|"]
    for c in doc["compare"]:
        r = c["nfe_ratio"]
        lines.append(f"| {c['strength']} | {c['a']} vs {c['b']} | {c['prompt']} | "
                     f"{_ci(c['pass_diff'])} | {_ci(c['kept_diff'])} | {_ci(c['drawn_diff'])} | "
                     f"{r['ratio']:.2f}x [{r['lo']:.2f}, {r['hi']:.2f}] |")
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", type=int, default=28, help="test prompts (7 report groups)")
    ap.add_argument("--strengths", default=",".join(map(str, STRENGTHS)))
    ap.add_argument("--settings", default=",".join(SETTINGS),
                    help=f"rows besides baseline-64, from {list(SETTINGS)}")
    ap.add_argument("--remask-strengths", default="0.5",
                    help="strengths at which the least-likely re-mask variants run")
    ap.add_argument("--remask-passes", default="1,4", help="scoring passes of each variant")
    ap.add_argument("--sampled-strengths", default="0.5", help="strengths at which the "
                    "official sampler also runs from the sources' sampled tokens")
    ap.add_argument("--codes", choices=("encoded", "sampled"), default="encoded",
                    help="what every run starts from: the VQ encoding of the source picture "
                    "(the product's path) or the tokens it was sampled with")
    ap.add_argument("--max-batch", type=int, default=0, help="images in flight (0 = all)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (0 = leave as is)")
    ap.add_argument("--model", default=None, help="checkpoint folder (default: dimoo-nano)")
    ap.add_argument("--json", default=str(ROOT / "lab" / "results" / "strength.json"))
    a = ap.parse_args(argv)
    a.strengths = [float(x) for x in a.strengths.split(",") if x]
    a.remask_strengths = [float(x) for x in a.remask_strengths.split(",") if x]
    a.remask_passes = [int(x) for x in a.remask_passes.split(",") if x]
    a.sampled_strengths = [float(x) for x in a.sampled_strengths.split(",") if x]
    a.settings = ["baseline-64"] + [s for s in a.settings.split(",") if s and s != "baseline-64"]
    if a.prompts <= 0 or set(a.settings) - set(SETTINGS) or not a.strengths \
            or not all(0 < d < 1 for d in a.strengths + a.remask_strengths) \
            or not set(a.remask_strengths + a.sampled_strengths) <= set(a.strengths) \
            or not all(1 <= p <= 4 for p in a.remask_passes):
        ap.error(f"--prompts > 0; --settings from {list(SETTINGS)}; strengths in (0, 1), the "
                 "re-mask and sampled strengths among them; --remask-passes in 1..4")
    return a


def context(pipe: Any, n: int, max_batch: int) -> dict[str, Any]:
    """The prompts (own and changed specs and captions), the sources and the report groups."""
    specs = scenes.quality_test_specs(n)
    changed = [changed_spec(s) for s in specs]
    captions = {"own": [scenes.caption_for(s) for s in specs],
                "changed": [scenes.caption_for(s) for s in changed]}
    seed0 = scenes.TEST_IMAGE_SEED
    return {"specs": {"own": specs, "changed": changed}, "captions": captions, "seed0": seed0,
            "max_batch": max_batch or n, "gidx": group_index([scenes.group_of(s) for s in specs]),
            "src": make_sources(pipe, captions["own"], seed0, max_batch or n), "sheet": {}}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    a = parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    start = time.perf_counter()
    pipe = load_dimoo(a.model or nano_model_path(), dtype=torch.float32)
    ctx = context(pipe, a.prompts, a.max_batch) | {
        "sampled_strengths": a.sampled_strengths,
        "codes": "codes" if a.codes == "encoded" else "tokens"}
    src, own = ctx["src"], ctx["specs"]["own"]
    src_passed = np.array(score_images(own, list(src["images"]))["passed"])
    rt_passed = np.array(score_images(own, list(src["roundtrip_images"]))["passed"])

    def log(d: float, name: str, r: dict) -> None:
        print(f"d={d:<5} {name:34s} T={r['steps']:3d} " + " ".join(
            f"{k}: pass={r[k]['score_overall']:.3f} kept={r[k]['kept_mean']:.3f} "
            f"nfe={r[k]['nfe_mean']:.1f}" for k in PROMPTS) + f" wall={r['wall_s']}s", flush=True)

    strengths, compare = {}, []
    for d in a.strengths:
        passes = a.remask_passes if d in a.remask_strengths else []
        strengths[str(d)], more = run_strength(pipe, ctx, d, a.settings, passes, log)
        compare += more
    command = shlex.join(["python", "-m", "lab.studies.strength",
                         *(sys.argv[1:] if argv is None else argv)])
    doc = {"meta": {"prompts": a.prompts, "set": "test (quality_test_specs, spec seed 9)",
                    "seed0": ctx["seed0"], "source": "official sampler, 64 steps",
                    "strengths": a.strengths, "settings": a.settings,
                    "remask_strengths": a.remask_strengths, "remask_passes": a.remask_passes,
                    "sampled_strengths": a.sampled_strengths, "codes": a.codes,
                    "cfg": pipe.default_cfg, "threads": torch.get_num_threads(),
                    "model": str(a.model or "dimoo_nano"), "command": command,
                    "wall_s": round(time.perf_counter() - start, 1),
                    "captions": ctx["captions"]},
           "env": env_info(),
           "source": {"score_overall": scores(src_passed, ctx["gidx"])["overall"],
                      "passed": src_passed.tolist(), "nfe_mean": float(np.mean(src["nfe"])),
                      "roundtrip_mean": float(src["roundtrip"].mean()),
                      "roundtrip_overall": scores(rt_passed, ctx["gidx"])["overall"],
                      "roundtrip_passed": rt_passed.tolist()},
           "strengths": strengths, "compare": compare}
    out = Path(a.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    from PIL import Image  # noqa: PLC0415 - only for the sample sheet

    save_png(Image.fromarray(sample_sheet(ctx, a.strengths)),
             out.with_name(out.stem + "_samples.png"))
    out.write_text(json_text(doc))
    print(markdown(doc))
    return doc


if __name__ == "__main__":
    main()
