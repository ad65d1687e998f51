"""The calibration on the emulated CUDA device (tests/kit/cuda_emu): its timing probe (one
denoiser call on the device, synchronised before the clock is read) and a short run of the
reference and one LADR candidate, each self-scored, with the CPU's recommendation and scores
and no violation."""

from __future__ import annotations

from pathlib import Path

import torch

from ladr_core.calibrate import calibrate
from ladr_core.calibrate.candidates import default_candidates
from ladr_core.dimoo import load_dimoo

PROMPTS = ["a red circle", "a blue square"]


def run(folder: Path, out: Path, device: str) -> dict:
    pipe = load_dimoo(folder, device=device, dtype=torch.float32)
    cands = default_candidates(8)[:2]  # the reference and the paper's policy
    return calibrate(pipe, folder, out, PROMPTS, size=32, steps=8, batch=2, budget_minutes=60,
                     candidates=cands)


def test_the_probe_and_a_short_calibration_run_on_the_device(dimoo_checkpoint: Path,
                                                             tmp_path: Path, emu) -> None:
    synced = emu.syncs
    got = run(dimoo_checkpoint, tmp_path / "cuda.json", "cuda")
    assert emu.syncs > synced  # the probe waited for the device before reading the clock
    assert not emu.violations
    want = run(dimoo_checkpoint, tmp_path / "cpu.json", "cpu")
    assert got["recommended"] == want["recommended"]
    for a, b in zip(got["candidates"], want["candidates"], strict=True):
        assert a["name"] == b["name"] and a.get("nfe") == b.get("nfe")


def test_the_probe_warms_up_the_device_before_its_clock(dimoo_checkpoint: Path, emu) -> None:
    """On a CUDA device the probe's first denoiser call (the process's first CUDA work: library
    handles, lazily loaded kernels) runs before the clock; the timed call is the second. The
    CPU's eager probe times its first call (tests/calibrate/test_calibrate_clock.py)."""
    from ladr_core.calibrate.runner import Calibration, CalibrationConfig

    pipe = load_dimoo(dimoo_checkpoint, device="cuda", dtype=torch.float32)
    events: list[str] = []
    make = pipe.make_denoiser

    def counting(*args, **kw):  # noqa: ANN002, ANN003, ANN202
        den = make(*args, **kw)

        def call(tokens: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
            events.append("call")
            return den(tokens, masked)
        call.layout = den.layout  # type: ignore[attr-defined]
        return call

    pipe.make_denoiser = counting  # type: ignore[method-assign]
    config = CalibrationConfig(tuple(PROMPTS), steps=4, size=32, batch=2)
    cal = Calibration(pipe, config, None, {}, None, None, None,
                      clock=lambda: events.append("clock") or 0.0)
    events.clear()  # the start time read on construction
    cal._probe()
    assert events == ["call", "clock", "call", "clock"]
    assert not emu.violations
