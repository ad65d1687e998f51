"""How long each section takes, estimated up front, and the clock that skips what does not fit.

Before the run, a bad ``--budget-minutes`` is refused against ``PRIOR_S``: conservative
guesses of each section on one H100 (and of the smoke run on a small CPU), written down once.
At the start of a run a small probe measures what the sections are made of on this machine: one
transformer block of the 8B shape (the whole model's call is taken as ``n_layers`` of them, an
overestimate: the embedding and the head are counted each time) and a few sampler steps of the
small checkpoint on the CPU and on the device. Each section's estimate is its planned work
times those costs, times ``SAFETY``, plus fixed costs nobody can probe cheaply (compiles,
building the weight layouts, the GPU tests), which are assumed. A section is started only when
the time left covers its estimate; section b gets the time left after c's and d's estimates,
and runs its compiled shapes only in what remains of that.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch

from lab.benchmarks.common import sync_device

__all__ = ["Clock", "PRIOR_S", "SAFETY", "estimates", "probe"]

SECTIONS = ("a", "b", "c", "d")
#: a-priori seconds per section: one H100 ("cuda"), the smoke run on a 2-core CPU ("cpu")
PRIOR_S = {"cuda": {"a": 150.0, "b": 180.0, "c": 90.0, "d": 40.0},
           "cpu": {"a": 40.0, "b": 20.0, "c": 20.0, "d": 15.0}}
SAFETY = 1.5
#: assumed, not probed (seconds): one torch.compile of a pass of the small checkpoints / of the
#: 8B shape (inductor; the smoke run uses the eager backend), building one weight layout of
#: the 8B shape, tests/core/test_gpu.py
COMPILE_SMALL_S = {"cuda": 60.0, "cpu": 2.0}
COMPILE_8B_S = {"cuda": 90.0, "cpu": 2.0}
BUILD_S = {"cuda": 15.0, "cpu": 0.5}
STREAMED_CALL_S = {"cuda": 0.75, "cpu": 0.0}  # ~15 GiB of blocks over PCIe per call
GPU_TESTS_S = {"cuda": 60.0, "cpu": 0.0}
#: section a's planned work per checkpoint: cases (cases.py) x their T (the nano preset's 128
#: and the baseline's 64 dominate), each case run A_CPU_RUNS times on the CPU (the reference)
#: and A_DEVICE_RUNS times on the device (a warm-up, then the run whose syncs are counted:
#: correctness.run_case; the rolling case also runs its four items alone on the device: about
#: two cases more)
A_RUNS, A_STEPS = 34, 80
A_CPU_RUNS, A_DEVICE_RUNS = 1, 2


@dataclass
class Clock:
    """Seconds left of the budget."""

    budget_s: float
    start: float = field(default_factory=time.perf_counter)

    def left(self) -> float:
        return self.budget_s - (time.perf_counter() - self.start)

    def elapsed(self) -> float:
        return time.perf_counter() - self.start


def probe(device: torch.device, smoke: bool) -> dict[str, Any]:
    """ms of one full call of a one-block model of the section-b shape at both sizes, and ms per
    sampler step of the section-a checkpoint on the CPU and on the device."""
    from .correctness import checkpoints
    from .models import model_only, random_model, shaped_pipeline, to_device
    from .speed import call_ms, shape

    config, ids, dtype, sizes = shape(smoke)
    one = config.replace(n_layers=1)
    model = random_model(one, device, dtype)
    pipe = shaped_pipeline(model, one, ids, sizes[0])
    block = {px: call_ms(pipe, px, 2, False)["ms"] for px in sizes}
    del pipe, model
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        folders = checkpoints(smoke, Path(tmp))
        folder = folders["tiny"] if smoke else folders["nano"]
        ref = model_only(folder)  # type: ignore[arg-type]
        dev = ref.with_transformer(to_device(ref.transformer, device))
        step = {}
        for name, pipe in (("cpu", ref), ("device", dev)):
            pipe.generate("a red circle", steps=2, strategy="baseline", decode=False)
            sync_device(pipe.device)
            t0 = time.perf_counter()
            pipe.generate("a red circle", steps=8, strategy="baseline", decode=False)
            sync_device(pipe.device)
            step[name] = (time.perf_counter() - t0) / 8 * 1e3
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return {"full_ms": {str(px): ms * config.n_layers for px, ms in block.items()},
            "block_ms": {str(px): ms for px, ms in block.items()},
            "step_ms": step, "sizes": list(sizes)}


def estimates(p: dict[str, Any], kind: str, smoke: bool) -> dict[str, Any]:
    """Seconds per section from the probe (module docstring), and the parts b and c use."""
    big, small = (p["full_ms"][str(s)] / 1e3 for s in p["sizes"])
    step = (A_CPU_RUNS * p["step_ms"]["cpu"] + A_DEVICE_RUNS * p["step_ms"]["device"]) / 1e3
    models = 1 if smoke else 2
    steps = 6 if smoke else A_STEPS
    a = SAFETY * models * A_RUNS * steps * step + COMPILE_SMALL_S[kind] + GPU_TESTS_S[kind]
    calls = 14 * (big + small) + 6 * big  # section b, one layout: timed calls and peaks
    layout = SAFETY * calls + BUILD_S[kind]
    streamed = SAFETY * (calls + 20 * STREAMED_CALL_S[kind]) + 2 * BUILD_S[kind]
    b = 5 * layout + streamed + layout  # bf16, fp8, comfy fp8, int8, GGUF x 2; streamed
    c_image = (2 + 64 + 64 + 2 * 20) * big  # warm-up, baseline, ML-Cache (as full), 2 replays
    rolling_mode = 8 * 20 * small  # 8 images of ~18 calls, one in flight (the slowest mode)
    c = SAFETY * (c_image + 4 * rolling_mode)
    d = SAFETY * (2 * 16 * 6 / 8 * 8 * small + 2 * small)  # 2 settings x 16 images x 6 calls
    return {"a": a, "b": b, "c": c, "d": d, "layout_s": max(layout, streamed),
            "compile_s": COMPILE_8B_S[kind], "rolling_mode_s": SAFETY * rolling_mode}
