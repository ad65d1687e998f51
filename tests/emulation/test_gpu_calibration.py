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
