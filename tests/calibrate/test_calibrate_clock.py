"""The calibration's timing probe reads its clock after the device has finished the probed call
(ladr_core.devices.synchronize), so a GPU's time budget is not planned on queueing time."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import ladr_core
from ladr_core.calibrate import runner
from ladr_core.calibrate.runner import Calibration, CalibrationConfig


def test_probe_synchronises_the_denoisers_device_before_the_second_clock_read(
        dimoo_checkpoint: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pipe = ladr_core.load_dimoo(dimoo_checkpoint, dtype=torch.float32)
    events: list[object] = []
    ticks = iter(range(100))

    def clock() -> float:
        events.append("clock")
        return float(next(ticks))

    config = CalibrationConfig(("a red circle", "a blue square"), steps=4, size=32, batch=2)
    cal = Calibration(pipe, config, None, {}, None, None, None, clock=clock)
    events.clear()  # the start time read on construction
    monkeypatch.setattr(runner, "synchronize", lambda device: events.append(torch.device(device)))
    seconds = cal._probe()
    assert events == ["clock", pipe.device, "clock"]
    assert seconds == pytest.approx(1.0 / 2)  # one tick over the two probed items


@pytest.mark.parametrize("compiled", [False, True])
def test_a_compiled_pipelines_probe_compiles_before_the_clock(
        dimoo_checkpoint: Path, monkeypatch: pytest.MonkeyPatch, compiled: bool) -> None:
    """Under ``pipe.compile()`` the first call of a pass compiles it: the probe makes that call
    before its first clock read and times the next one; an eager pipeline times its first."""
    pipe = ladr_core.load_dimoo(dimoo_checkpoint, dtype=torch.float32)
    marker = object() if compiled else None  # what compile() sets on its view
    pipe.compiled = marker
    events: list[str] = []
    make = pipe.make_denoiser

    def counting(*args, **kw):  # noqa: ANN002, ANN003, ANN202
        pipe.compiled = None  # the passes stay eager here: only the probe sees the marker
        den = make(*args, **kw)
        pipe.compiled = marker

        def call(tokens: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
            events.append("call")
            return den(tokens, masked)
        call.layout = den.layout  # type: ignore[attr-defined]
        return call

    monkeypatch.setattr(pipe, "make_denoiser", counting)
    config = CalibrationConfig(("a red circle", "a blue square"), steps=4, size=32, batch=2)
    cal = Calibration(pipe, config, None, {}, None, None, None,
                      clock=lambda: events.append("clock") or 0.0)
    events.clear()
    cal._probe()
    assert events == (["call"] if compiled else []) + ["clock", "call", "clock"]
