"""ComfyUI fp8's input scales on DiMOO-nano: is calibrating on random codes enough, which margin.

    OMP_NUM_THREADS=1 nice -n 10 python -m benchmarks.experiments.quant_calibration \
        --json benchmarks/results/quant_calibration.json

* ``random``: what the converter does (calibrate.py): max |input| of every block linear over
  one denoiser call on 16 validation captions x masked 1.0 / 0.5 / 0.1 with random codes;
* ``sampled``: the same captions actually generated (baseline, 64 steps, every step's states);
* ``test``: 16 test captions generated the same way: the inputs a user's prompts produce.

Ratios per layer ``test / random`` and ``sampled / random`` (max, median, min over the 42
linears): above 1, a margin-1 scale would clip those inputs. Then the fast path's logits error (W8A8:
weights and inputs fp8, ``quant_quality.logit_calls`` on the test captions) for input scales of
margin 1, 2, 4 and 8 x the random calibration, and without input scales (ComfyUI then uses 1).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

from benchmarks.quality import prompt_set
from benchmarks.quant_quality import logit_calls, logit_errors
from ladr_core import Baseline, load_dimoo, nano_model_path
from ladr_core.dimoo import (
    Conversion,
    convert_folder,
    measure_input_ranges,
    quant,
    record_input_amax,
)
from testbed import scenes

ROOT = Path(__file__).resolve().parents[2]
MARGINS = (1.0, 2.0, 4.0, 8.0, None)


def sampled_amax(captions: list[str], seed0: int) -> dict[str, float]:
    """max |input| per block linear over whole baseline-64 generations of ``captions``."""
    pipe = load_dimoo(nano_model_path(), dtype=torch.float32)
    with record_input_amax(pipe.transformer) as amax:
        pipe.generate(captions, steps=64, seed=seed0, strategy=Baseline(), decode=False)
    return dict(amax)


def ratios(num: dict[str, float], den: dict[str, float]) -> dict[str, float]:
    r = [num[k] / den[k] for k in den]
    return {"max": max(r), "median": statistics.median(r), "min": min(r)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "results" /
                                          "quant_calibration.json"))
    a = ap.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    nano = nano_model_path()
    calib = [scenes.caption_for(s) for s in scenes.validation_specs(a.prompts)]
    specs, seed0 = prompt_set("test", a.prompts)
    test = [scenes.caption_for(s) for s in specs]
    random_amax = measure_input_ranges(nano, calib)
    out: dict[str, Any] = {
        "test_over_random": ratios(sampled_amax(test, seed0), random_amax),
        "sampled_over_random": ratios(sampled_amax(calib, 0), random_amax)}
    ref = logit_calls(load_dimoo(nano, dtype=torch.float32), test)
    errors = {}
    with tempfile.TemporaryDirectory() as tmp:
        for margin in MARGINS:
            amax = {} if margin is None else {k: margin * v for k, v in random_amax.items()}
            folder = convert_folder(nano, Path(tmp) / f"m{margin}", Conversion(
                "comfy_fp8_e4m3fn", torch.float32, input_amax=amax))
            pipe = load_dimoo(folder, dtype=torch.float32)
            for m in pipe.transformer.modules():
                if isinstance(m, quant.QuantLinear):
                    m.quantize_input = True
            errors["none" if margin is None else f"margin {margin:g}"] = logit_errors(
                ref, logit_calls(pipe, test))
    out["w8a8_logits"] = errors
    meta = {"prompts": a.prompts, "threads": a.threads, "command":
            "python -m benchmarks.experiments.quant_calibration " + " ".join(sys.argv[1:] if argv is None
                                                                 else argv)}
    print(json.dumps(out, indent=1))
    Path(a.json).write_text(json.dumps({"meta": meta, **out}, indent=1) + "\n")
    print(f"wrote {a.json}")
    return out


if __name__ == "__main__":
    main()
