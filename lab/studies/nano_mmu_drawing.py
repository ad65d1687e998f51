"""Does DiMOO-nano-mmu draw as well as the shipped nano? The evaluator's test-set score, paired.

    nice -n 10 python -m lab.studies.nano_mmu_drawing --prompts 140 \
        --json lab/results/nano_mmu_drawing.json

Both checkpoints generate the quality test set's first ``--prompts`` prompts (``lab.nano.scenes``
``quality_test_specs``, item i with seed 100000 + i) with the official sampler at 64 steps, the
shipped nano's guidance scale and temperature 1, in chunks of 35 as ``lab.studies.quality``
does (``run_chunk``: same arguments, so the same seeds). The sibling's chunks are generated
here. The shipped nano's are the committed runs of ``lab/results/quality_test.json``
(``quality_test_runs/test.npz``, baseline-64) when the first chunk, generated again here,
reproduces their verdicts exactly (``--shipped stored``), else generated here too
(``--shipped fresh``). Scores per report group and overall (``lab.studies.paired_stats``), the
paired stratified bootstrap 95 % interval of sibling - shipped, and the machine and commit.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lab.benchmarks.common import env_info, json_text
from lab.nano import scenes
from lab.studies.paired_stats import group_index, paired_bootstrap, scores
from lab.studies.quality import run_chunk
from lab.studies.run_store import load_chunk, set_file
from ladr_core import load_dimoo, nano_mmu_model_path, nano_model_path

ROOT = Path(__file__).resolve().parents[2]
STORED = ROOT / "lab" / "results" / "quality_test_runs"
ARGS: dict[str, Any] = {"strategy": "baseline", "steps": 64}
NAME = "baseline-64"
CHUNK = 35


def generate_all(folder: Path, specs: list, seed0: int, runs: Path, tag: str,
                 cfg: float, temperature: float) -> np.ndarray:
    """Verdicts [n] of one checkpoint on the prompts, chunk by chunk (stored in `runs`)."""
    pipe = load_dimoo(folder, dtype=torch.float32)
    passed = []
    for lo in range(0, len(specs), CHUNK):
        run = run_chunk(pipe, (set_file(runs, "test"), f"{tag}/{NAME}"), "yes",
                        specs[lo:lo + CHUNK], lo, seed0, ARGS, cfg, temperature)
        passed.append(run["passed"])
        print(f"{tag} [{lo + len(run['passed'])}/{len(specs)}] "
              f"pass {float(np.mean(run['passed'])):.3f}", flush=True)
    return np.concatenate(passed).astype(bool)


def stored_shipped(n: int) -> np.ndarray | None:
    """The committed shipped-nano verdicts of the first `n` test prompts (baseline-64)."""
    out = []
    for lo in range(0, n, CHUNK):
        chunk = load_chunk(set_file(STORED, "test"), NAME, lo, None)
        if chunk is None:
            return None
        out.append(np.asarray(chunk["passed"], dtype=bool))
    return np.concatenate(out)[:n]


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--prompts", type=int, default=140, help="a multiple of 35 (7 groups x 5)")
    ap.add_argument("--shipped", choices=("stored", "fresh"), default="stored")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", default=str(ROOT / "lab" / "results" / "nano_mmu_drawing.json"))
    ap.add_argument("--runs", default=str(ROOT / "runs" / "nano_mmu" / "drawing"))
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    a = parse(argv)
    torch.set_num_threads(a.threads)
    specs, seed0 = scenes.prompt_set("test", a.prompts)
    gidx = group_index([scenes.group_of(s) for s in specs])
    shipped_pipe_cfg = load_dimoo(nano_model_path(), dtype=torch.float32).default_cfg
    runs, temperature = Path(a.runs), 1.0
    check: dict[str, Any] = {"mode": a.shipped}
    shipped = None
    if a.shipped == "stored":
        stored = stored_shipped(a.prompts)
        again = generate_all(nano_model_path(), specs[:CHUNK], seed0, runs, "shipped",
                             shipped_pipe_cfg, temperature)
        same = stored is not None and bool((stored[:CHUNK] == again).all())
        check |= {"first_chunk_regenerated": CHUNK, "verdicts_equal": same}
        shipped = stored if same else None
    if shipped is None:
        check["mode"] = "fresh"
        shipped = generate_all(nano_model_path(), specs, seed0, runs, "shipped",
                               shipped_pipe_cfg, temperature)
    sibling = generate_all(nano_mmu_model_path(), specs, seed0, runs, "sibling",
                           shipped_pipe_cfg, temperature)
    result = {"meta": {"set": "test", "prompts": a.prompts, "seed0": seed0, "steps": 64,
                       "cfg": shipped_pipe_cfg, "temperature": temperature,
                       "strategy": "baseline (official order)", "shipped_runs": check,
                       "command": "python -m lab.studies.nano_mmu_drawing " + " ".join(
                           sys.argv[1:] if argv is None else argv)},
              "shipped": {"score": scores(shipped, gidx), "passed": shipped.tolist()},
              "sibling": {"score": scores(sibling, gidx), "passed": sibling.tolist()},
              "sibling_minus_shipped": paired_bootstrap(sibling, shipped, gidx),
              "env": env_info()}
    Path(a.json).write_text(json_text(result))
    d = result["sibling_minus_shipped"]["overall"]
    print("| results key | score | vs shipped |\n|---|---|---|\n"
          f"| `shipped` | {result['shipped']['score']['overall']:.3f} | - |\n"
          f"| `sibling` | {result['sibling']['score']['overall']:.3f} | "
          f"{d['diff']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}] |")
    print(f"overall shipped {result['shipped']['score']['overall']:.3f} sibling "
          f"{result['sibling']['score']['overall']:.3f} diff {d['diff']:+.3f} "
          f"[{d['lo']:+.3f}, {d['hi']:+.3f}] -> {a.json}", flush=True)
    return result


if __name__ == "__main__":
    main()
