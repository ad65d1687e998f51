"""Run one job of the pack on the emulated CUDA device and print what the emulation saw:

    python -m tests.kit.cuda_emu [--strategy ladr] [--layout bf16] [--size 48] [--cache ladr]

The shipped nano checkpoint (or ``--model FOLDER``), saved first in ``--layout`` with
``python -m ladr_core.dimoo.save --device cuda`` when that is not ``bf16`` / ``fp32``, loaded on
the emulated device and run once; prints JSON: the violations (none, or the first, named by
file and line, with exit status 1), the host reads the step loop made per step, the blocking
transfers outside it by file and line, and the device memory the allocator model counted.
An unknown strategy, layout or cache, or a size the model cannot draw, is refused with one
message naming the choices.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import torch

from ladr_core import nano_model_path, strategy_names
from ladr_core.dimoo import MLCacheConfig, load_dimoo, save
from ladr_core.errors import InputError

from . import CudaEmulationError, emulated_cuda

LAYOUTS = ("fp32", "bf16", *save.FORMATS)
CACHES = {"none": None, "official": MLCacheConfig, "ladr": MLCacheConfig.ladr}


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m tests.kit.cuda_emu", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strategy", default="ladr", choices=strategy_names())
    ap.add_argument("--layout", default="fp32", choices=LAYOUTS)
    ap.add_argument("--cache", default="none", choices=tuple(CACHES))
    ap.add_argument("--size", type=int, default=None, help="px (default: the model's own)")
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--model", default=None, help="checkpoint folder (default: shipped nano)")
    return ap.parse_args(argv)


def _load(a: argparse.Namespace, work: Path) -> object:
    folder = Path(a.model) if a.model else nano_model_path()
    if a.layout in ("fp32", "bf16"):
        dtype = torch.float32 if a.layout == "fp32" else torch.bfloat16
        return load_dimoo(folder, device="cuda", dtype=dtype)
    name = work / ("model.gguf" if a.layout.startswith("Q") else "model")
    path = save.main([str(folder), str(name), "--weight-dtype", a.layout, "--device", "cuda"])
    return load_dimoo(path, device="cuda", dtype=torch.float32)


def run(argv: list[str] | None = None) -> dict:
    a = _args(argv)
    cache = CACHES[a.cache]() if CACHES[a.cache] else None
    with tempfile.TemporaryDirectory() as work, emulated_cuda(raise_on_violation=False) as emu:
        pipe = _load(a, Path(work))
        before = emu.h2d + emu.reads
        try:
            res = pipe.generate("a red circle", width=a.size, height=a.size, steps=a.steps,
                                seed=0, strategy=a.strategy, cache=cache)
        except InputError as exc:
            raise SystemExit(f"error: {exc}") from None
        outside = (emu.h2d + emu.reads) - before
        return {"strategy": a.strategy, "layout": a.layout, "cache": a.cache,
                "steps": res.steps, "violations": [v.__dict__ for v in emu.violations],
                "loop_reads": sum(emu.loop_reads.values()),
                "blocking_transfers_outside_the_loop": dict(outside),
                "peak_allocated_bytes": emu.memory.peak_allocated,
                "peak_reserved_bytes": emu.memory.peak_reserved}


def main(argv: list[str] | None = None) -> int:
    try:
        out = run(argv)
    except CudaEmulationError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(json.dumps(out, indent=1))
    return 1 if out["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
