"""Fixtures of the CUDA-emulation tests (tests/kit/cuda_emu): the emulated device for one test,
and a run helper that gives the same call's CPU result beside it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.kit.cuda_emu import EmulationState, GuardBuildError, emulated_cuda


@pytest.fixture
def emu() -> Iterator[EmulationState]:
    """One emulated CUDA device for the test; a violation raises CudaEmulationError where it
    happens (file and line in the message)."""
    try:
        with emulated_cuda() as state:
            yield state
    except GuardBuildError as exc:  # no compiler: say so loudly, this is not a pass
        pytest.fail(f"the CUDA emulation could not start: {exc}")

