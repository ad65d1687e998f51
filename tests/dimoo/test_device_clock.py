"""Times are read after the device has finished (ladr_core.devices.synchronize before the clock),
and the host -> device helpers keep values and devices: CPU, the tiny checkpoint."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
import torch

from ladr_core.devices import index, synchronize, to_device
from ladr_core.dimoo import DiMOOPipeline, runs


def test_host_to_device_helpers_keep_values_and_return_device_tensors_unchanged() -> None:
    cpu = torch.device("cpu")
    t = torch.arange(5)
    assert to_device(t, cpu) is t  # already there: no copy
    got = index([3, 0, 2], cpu)
    assert got.dtype == torch.long and got.tolist() == [3, 0, 2] and got.device == cpu
    assert index([], cpu).shape == (0,)
    synchronize(cpu)  # nothing to wait for on a CPU
    synchronize("cpu")


def test_run_seconds_are_read_after_the_device_has_finished(pipe: DiMOOPipeline,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """run_job synchronises the run's device after sampling and after decoding, each time
    before it reads the clock (a CUDA clock read without it times the queueing only)."""
    events: list[object] = []
    real_sample = runs.sample

    def sample(*args: object, **kwargs: object) -> object:
        out = real_sample(*args, **kwargs)
        events.append("sampled")
        return out

    def clock() -> float:
        events.append("clock")
        return time.perf_counter()

    monkeypatch.setattr(runs, "sample", sample)
    monkeypatch.setattr(runs, "synchronize", lambda device: events.append(torch.device(device)))
    monkeypatch.setattr(runs, "time", SimpleNamespace(perf_counter=clock))
    res = pipe.generate("a red circle", width=16, height=16, steps=4, seed=0)
    assert res.images is not None
    dev = pipe.device
    # start clock, sampling, sync, clock (seconds) / clock (decode start), decode, sync, clock
    assert events == ["clock", "sampled", dev, "clock", "clock", dev, "clock"], events
