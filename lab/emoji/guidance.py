"""Choose the emoji model's guidance scale on VALIDATION prompts:
``python -m lab.emoji.guidance --checkpoint CKPT [--prompts 50]``.

The official scale (4.0) is tuned for the 8B model; nano's sweep (lab/nano/tune_cfg.py) picked
0.75 for its sharper predictions. This is the same sweep for the emoji model with its judge as
the evaluator: for each scale, the official sampler at T = 64 and LADR (paper policy) at T = 64
generate the validation-split scenes (never the test prompts the verdicts use, seeds
``SEED0 + i``), and the scale with the best mean pass rate of the two wins (a tie: the smaller
scale). The results file records the checkpoint's step: ``lab.emoji.verdicts --guidance FILE``
uses the pick only on that same checkpoint.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lab.benchmarks.common import json_text
from lab.emoji import verdict_runs as R
from lab.emoji.judge import Judge
from lab.emoji.results import provenance
from lab.emoji.scenes import VAL_SEED, Scene, prompt_scenes
from lab.studies.paired_stats import group_index, scores

ROOT = Path(__file__).resolve().parents[2]
SCALES = (0.0, 0.5, 1.0, 1.5, 2.0, 4.0)
SETTINGS = {"baseline-64": {"strategy": "baseline", "steps": 64},
            "ladr-64": {"strategy": "ladr", "steps": 64}}
SEED0 = 200_000
DEFAULT_JSON = ROOT / "lab" / "results" / "emoji_guidance.json"


@contextlib.contextmanager
def opened_model(model: str | None, checkpoint: str | None) -> Iterator[tuple[Any, Path, dict]]:
    """(pipeline, folder, checkpoint info) of a model folder or of a training checkpoint
    exported to a temporary folder (the checkpoint is only read)."""
    from lab.emoji.packages import cache_dir
    from lab.emoji.train import export_checkpoint, model_dir
    from ladr_core import load_dimoo

    with tempfile.TemporaryDirectory(prefix="emoji_model_") as tmp:
        folder, info = Path(model) if model else model_dir(), {}
        if checkpoint:
            folder, info = Path(tmp), export_checkpoint(Path(checkpoint), Path(tmp))
        if not (folder / "model.safetensors").is_file():
            raise SystemExit(f"error: {folder} holds no model.safetensors (the transformer run "
                             "has not finished): give --checkpoint "
                             f"{cache_dir() / 'runs' / 'transformer_ckpt.pt'} or --model DIR")
        yield load_dimoo(folder, dtype=torch.float32), folder, info


def sweep(pipe: Any, judge: Judge, val: list[Scene], scales: list[float], batch: int,
          log: Any = print) -> dict[str, Any]:
    """Every scale x setting on `val`; the pick (module docstring)."""
    gidx = group_index([sc.spec.category for sc in val])
    rows = []
    for cfg in scales:
        row: dict[str, Any] = {"cfg": cfg}
        for name, args in SETTINGS.items():
            run = R.run_t2i(pipe, judge, val, args, cfg, SEED0, batch)
            row[name] = scores(run["passed"], gidx)
        row["mean_overall"] = float(np.mean([row[n]["overall"] for n in SETTINGS]))
        rows.append(row)
        log(row)
    best = max(rows, key=lambda r: (r["mean_overall"], -r["cfg"]))
    return {"validation_prompts": len(val), "seed0": SEED0, "rows": rows, "pick": best["cfg"]}


def tuned_cfg(path: Path, step: int | None) -> float:
    """The pick of a guidance results file, for a checkpoint at `step` (None: a model folder,
    whose step is unknown, so the file's own step is trusted)."""
    import json

    if not path.is_file():
        raise SystemExit(f"error: no guidance results at {path}: run python -m lab.emoji.guidance "
                         "--checkpoint CKPT first")
    doc = json.loads(path.read_text())
    tuned_at = doc["checkpoint"]["step"]
    if step is not None and tuned_at != step:
        raise SystemExit(f"error: {path} was tuned on the checkpoint at step {tuned_at}, this one "
                         f"is at step {step}: rerun python -m lab.emoji.guidance on it")
    return float(doc["pick"])


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--model", default=None, help="model folder (default: the cache's)")
    src.add_argument("--checkpoint", default=None, help="a training checkpoint")
    ap.add_argument("--prompts", type=int, default=50, help="validation prompts")
    ap.add_argument("--scales", default=",".join(map(str, SCALES)))
    ap.add_argument("--batch", type=int, default=25)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", default=str(DEFAULT_JSON))
    a = ap.parse_args(argv)
    try:
        a.scales = [float(s) for s in a.scales.split(",") if s]
    except ValueError:
        ap.error(f"--scales must be comma-separated numbers, got {a.scales!r}")
    if a.prompts < 1 or a.batch < 1 or not a.scales or min(a.scales) < 0:
        ap.error("--prompts and --batch must be >= 1, --scales non-empty and >= 0")
    return a


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from lab.emoji.judge_eval import judge_dir

    a = parse(argv)
    torch.set_num_threads(a.threads)
    val = prompt_scenes(a.prompts, "validation", VAL_SEED)
    with opened_model(a.model, a.checkpoint) as (pipe, _folder, info):
        doc = sweep(pipe, Judge.load(judge_dir()), val, a.scales, a.batch,
                    lambda row: print("cfg", row["cfg"], round(row["mean_overall"], 3), flush=True))
    doc = {**provenance(), "command": "python -m lab.emoji.guidance " + " ".join(
        sys.argv[1:] if argv is None else argv),
           "checkpoint": {"source": a.checkpoint or a.model or "cache model",
                          "step": info.get("step"), "loss": info.get("loss")}, **doc}
    Path(a.json).write_text(json_text(doc))
    print(f"pick cfg {doc['pick']}\nwrote {a.json}")
    return doc


if __name__ == "__main__":
    main()
