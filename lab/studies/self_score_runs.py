"""Generate DiMOO-nano images for the self-score validation, keeping their final tokens.

    OMP_NUM_THREADS=1 nice -n 10 python -m lab.studies.self_score_runs --set test --prompts 490 \
        --runs lab/results/self_score_runs

For every setting (the baseline at T = 8, 12, 16, 18, 24, 32, 64; the LADR presets, the paper
policy with the baseline's noisy ranking, the paper's ablations on the adaptive policy and
the calibration's threshold grid; Prophet; ML-Cache rows) and every chunk of ``--batch`` prompts: the final tokens (uint8, the
nano codebook has 256 codes), per-image NFE and token-forwards at batch 1, the evaluator's
pass / fail of the decoded image (``lab.nano.evaluator``), and the wall time. Chunks go
chunk-major (every setting finishes chunk k before chunk k + 1 starts), each is written
atomically to ``<runs>/<set>[_<weights>]/<setting>/<lo>.npz`` and reused when its key
(setting, arguments, prompt range) matches, so an interrupted run resumes where it stopped.
Item i of a chunk is generated with seed ``seed0 + i`` exactly as ``lab/studies/quality.py``
does, so where that benchmark stored a chunk of the same strategy (``--check-stored``, its
``lab.studies.run_store`` file), what it kept must agree: the tokens, or (where it kept images
instead) the sample images byte-identical or within 1/255 where the VQ decoder's float rounding
moved, and the NFE and verdicts; the script counts them.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lab.nano import scenes
from lab.nano.evaluator import score_images
from lab.studies.run_store import load_chunk as load_stored
from ladr_core import (
    LADR,
    PRESETS,
    AdaptiveRescue,
    Baseline,
    MLCacheConfig,
    Prophet,
    Strategy,
    load_dimoo,
    nano_model_path,
)
from ladr_core.calibrate import TAU_GRID, tau_policy

ROOT = Path(__file__).resolve().parents[2]

BASELINE_STEPS = (8, 12, 16, 18, 24, 32, 64)
ABLATIONS = {"non-neighbors": {"candidates": "non_neighbors"},
             "random-candidates": {"candidates": "random"},
             "confidence": {"metric": "confidence"}, "random-metric": {"metric": "random"}}
STORED = {"baseline-64": "baseline-64", "ladr-paper": "ladr", "ladr-nano": "ladr-nano",
          "ladr-adaptive": "ladr-adaptive", "ladr-adaptive-strict": "ladr-adaptive-strict",
          "ladr-nano+mlcache": "ladr-nano+mlcache", **{
              f"ladr-adaptive-{a}": f"ladr-adaptive-{a}" for a in ABLATIONS}}
"""Setting -> the lab/studies/quality.py strategy stored with the same arguments."""


@dataclass(frozen=True)
class Setting:
    """One row of the sweep: a strategy object, its T and an optional ML-Cache."""

    strategy: Strategy
    steps: int
    cache: MLCacheConfig | None = None

    def key(self) -> str:
        return repr((self.strategy, self.steps, self.cache))


NANO_T = 128  # the steps the nano preset was tuned at, which the committed results ran


def settings() -> dict[str, Setting]:
    """The sweep's settings, by name (module docstring)."""
    out = {f"baseline-{t}": Setting(Baseline(), t) for t in BASELINE_STEPS}
    paper = PRESETS["paper"].policy
    adaptive = PRESETS["adaptive"].policy
    out["ladr-paper"] = Setting(LADR(paper), 64)
    out["ladr-paper-gumbel"] = Setting(LADR(replace(paper, selection="gumbel")), 64)
    out["ladr-delayed"] = Setting(LADR.preset("delayed"), 64)
    out["ladr-nano"] = Setting(LADR.preset("nano"), NANO_T)
    out["ladr-adaptive"] = Setting(LADR.preset("adaptive"), 64)
    out["ladr-adaptive-strict"] = Setting(LADR(replace(adaptive, adaptive=AdaptiveRescue(
        pace=4.0, anchor_quantile=1.0))), 64)
    for name, change in ABLATIONS.items():
        out[f"ladr-adaptive-{name}"] = Setting(LADR(replace(adaptive, **change)), 64)
    for t in TAU_GRID:  # the calibration's threshold grid (ladr_core.calibrate.candidates)
        out[f"ladr-tau{t:g}"] = Setting(LADR(tau_policy(t)), 64)
    out["prophet"] = Setting(Prophet(), 64)
    out["mlcache"] = Setting(Baseline(), 64, MLCacheConfig())
    out["ladr-nano+mlcache"] = Setting(LADR.preset("nano"), NANO_T,
                                       MLCacheConfig.ladr())
    return out


def generate(pipe: Any, setting: Setting, captions: list[str], seed0: int, cfg: float
             ) -> dict[str, Any]:
    """Tokens uint8 [n, N], per-image NFE and token-forwards (batch 1), images, wall seconds.

    With an ML-Cache one prompt at a time (its refresh schedule is shared by a batch)."""
    batch = 1 if setting.cache is not None else len(captions)
    tokens, nfe, fwd, images = [], [], [], []
    start = time.perf_counter()
    for s in range(0, len(captions), batch):
        res = pipe.generate(captions[s:s + batch], steps=setting.steps, cfg=cfg, seed=seed0 + s,
                            strategy=setting.strategy, cache=setting.cache)
        nfe += res.item_nfe  # each image's forwards and tokens, as in its own single run
        fwd += res.item_token_forwards
        tokens.append(res.tokens.to(torch.uint8).numpy())
        images.append((res.images.float().clamp(0, 1) * 255).round().to(torch.uint8).numpy())
    return {"tokens": np.concatenate(tokens), "nfe": np.array(nfe, dtype=np.int16),
            "token_forwards": np.array(fwd, dtype=np.int64),
            "images": np.concatenate(images), "wall_s": time.perf_counter() - start}


def save_atomic(path: Path, **arrays: Any) -> None:
    """np.savez_compressed to a temporary name, then rename: a reader sees all or nothing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".partial.npz")
    np.savez_compressed(tmp, **arrays)
    os.replace(tmp, path)


def load_chunk(path: Path, key: str) -> dict[str, Any] | None:
    """A stored chunk made with the same key, else None."""
    if not path.is_file():
        return None
    with np.load(path) as z:
        if str(z["key"]) != key:
            return None
        return {k: z[k] for k in z.files if k != "key"}


def stored_match(stored: Path, name: str, lo: int, out: dict[str, Any]) -> str | None:
    """How this chunk compares with lab/studies/quality.py's stored chunk of the same strategy:
    "equal" (same tokens, or byte-identical stored images, and the same NFE and verdicts),
    "within 1" (no stored pixel off by more than 1/255: the VQ decoder's rounding, same
    tokens), "DIFFER", or None (no such chunk)."""
    other = STORED.get(name)
    kept = load_stored(stored, other, lo, None) if other else None
    if kept is None:
        return None
    n = len(kept["nfe"])
    if n != len(out["nfe"]) or not (np.array_equal(kept["nfe"], out["nfe"])
                                    and np.array_equal(kept["passed"], out["passed"])):
        return "DIFFER"
    if "tokens" in kept:
        return "equal" if np.array_equal(kept["tokens"], out["tokens"]) else "DIFFER"
    shown = kept.get("images", out["_images"][:0])
    gap = int(np.abs(shown.astype(np.int16) - out["_images"][:len(shown)].astype(np.int16)).max(
        initial=0))
    return "equal" if gap == 0 else "within 1" if gap <= 1 else "DIFFER"


def run_chunk(pipe: Any, path: Path, name: str, setting: Setting, specs: list, lo: int,
              seed0: int, cfg: float, tag: str) -> tuple[dict[str, Any], bool]:
    """One setting on one chunk: (stored arrays, reused?)."""
    key = repr((name, setting.key(), lo, lo + len(specs), seed0, cfg, tag))
    found = load_chunk(path, key)
    if found is not None:
        return found, True
    captions = [scenes.caption_for(s) for s in specs]
    run = generate(pipe, setting, captions, seed0 + lo, cfg)
    passed = np.array(score_images(specs, list(run["images"]))["passed"], dtype=bool)
    out = {k: run[k] for k in ("tokens", "nfe", "token_forwards")} | {
        "passed": passed, "wall_s": np.float64(run["wall_s"]), "_images": run["images"]}
    save_atomic(path, key=np.array(key), **{k: v for k, v in out.items() if k != "_images"})
    return out, False


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--set", choices=("test", "validation"), default="test")
    ap.add_argument("--prompts", type=int, default=490)
    ap.add_argument("--batch", type=int, default=35, help="prompts per chunk (and per call)")
    ap.add_argument("--settings", default="all", help="comma list of names, or 'all' (--list)")
    ap.add_argument("--weight-dtype", default=None, help="e.g. fp8_e4m3fn (default: as stored)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", default=str(ROOT / "lab" / "results" / "self_score_runs"))
    ap.add_argument("--check-stored", default=str(ROOT / "lab" / "results"
                                                  / "quality_test_runs" / "test.npz"),
                    help="lab/studies/quality.py's stored runs to compare with ('' = skip)")
    ap.add_argument("--list", action="store_true", help="print the setting names and exit")
    a = ap.parse_args(argv)
    if a.prompts < 1 or a.batch < 1:
        ap.error("--prompts and --batch must be >= 1")
    return a


def main(argv: list[str] | None = None) -> None:
    a = parse(argv)
    table = settings()
    if a.list:
        print("\n".join(table))
        return
    names = list(table) if a.settings == "all" else a.settings.split(",")
    unknown = [n for n in names if n not in table]
    if unknown:
        raise SystemExit(f"--settings: unknown {unknown}; see --list")
    torch.set_num_threads(a.threads)
    pipe = load_dimoo(nano_model_path(), dtype=torch.float32, weight_dtype=a.weight_dtype)
    specs = (scenes.quality_test_specs(a.prompts) if a.set == "test"
             else scenes.validation_specs(a.prompts))
    seed0 = scenes.TEST_IMAGE_SEED if a.set == "test" else 0
    tag = a.weight_dtype or "stored"
    folder = Path(a.runs) / (a.set if a.weight_dtype is None else f"{a.set}_{a.weight_dtype}")
    stored_file = Path(a.check_stored) if a.check_stored and a.set == "test" else None
    matches: dict[str, int] = {}
    for lo in range(0, a.prompts, a.batch):
        chunk = specs[lo:lo + a.batch]
        for name in names:
            out, reused = run_chunk(pipe, folder / name / f"{lo:05d}.npz", name, table[name],
                                    chunk, lo, seed0, pipe.default_cfg, tag)
            same = (stored_match(stored_file, name, lo, out)
                    if stored_file is not None and "_images" in out and a.weight_dtype is None
                    else None)
            if same is not None:
                matches[same] = matches.get(same, 0) + 1
            print(f"[{lo + len(chunk)}/{a.prompts}] {name:30s} nfe={out['nfe'].mean():6.2f} "
                  f"pass={out['passed'].mean():.3f} wall={float(out['wall_s']):.1f}s"
                  f"{' (reused)' if reused else ''}"
                  f"{'' if same is None else ' stored images ' + same}",
                  flush=True)
    print(f"done: {folder}; chunks compared with lab/studies/quality.py's stored runs: "
          f"{matches}", flush=True)


if __name__ == "__main__":
    main()
