"""Graph-capture rules (tests/kit/cuda_emu/capture.py): what CUDA refuses while a graph is being
captured is refused here, named with its file and line; a replay that would read an input freed
since the capture is caught; what torch allows (device allocations) is allowed."""

from __future__ import annotations

import inspect
from collections.abc import Callable

import pytest
import torch

from tests.kit.cuda_emu import CudaEmulationError, emulated_cuda

HERE = "tests/emulation/test_capture_rules.py"


def line_of(fn: Callable, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def _captured(fn: Callable[[], object]) -> torch.cuda.CUDAGraph:
    graph = torch.cuda.CUDAGraph()
    graph.capture_begin()
    try:
        fn()
    finally:
        graph.capture_end()
    return graph


def _refused(fn: Callable[[], object], test: Callable, text: str, what: str) -> None:
    with pytest.raises(CudaEmulationError) as err:
        _captured(fn)
    assert err.value.kind == "capture" and what in str(err.value)
    assert err.value.where.startswith(f"{HERE}:{line_of(test, text)} "), err.value.where


def test_pinned_allocation_during_capture_is_refused() -> None:
    with emulated_cuda():
        host = torch.ones(4)
        _refused(lambda: host.pin_memory(),  # the pin
                 test_pinned_allocation_during_capture_is_refused, "# the pin", "cudaHostAlloc")
        _refused(lambda: torch.empty(4, pin_memory=True),  # pinned factory
                 test_pinned_allocation_during_capture_is_refused, "# pinned factory",
                 "cudaHostAlloc")
        host.pin_memory()  # outside a capture: fine


def test_freeing_memory_during_capture_is_refused_and_the_allocator_does_not_retry() -> None:
    with emulated_cuda(card="rtx3060", storage="meta"):
        _refused(lambda: torch.cuda.empty_cache(),  # the free
                 test_freeing_memory_during_capture_is_refused_and_the_allocator_does_not_retry,
                 "# the free", "cudaFree")
        cached = torch.empty(6 * 2 ** 30, dtype=torch.uint8, device="cuda")
        del cached  # 6 GiB cached, not in use
        with pytest.raises(torch.OutOfMemoryError):  # eagerly the retry would release them
            _captured(lambda: torch.empty(7 * 2 ** 30, dtype=torch.uint8, device="cuda"))
        torch.empty(7 * 2 ** 30, dtype=torch.uint8, device="cuda")  # outside: retry, fits


def test_a_library_s_first_use_inside_a_capture_is_refused_until_warmed_up() -> None:
    with emulated_cuda():
        x = torch.ones(8, 8, device="cuda")
        _captured(lambda: x + 1)  # device allocations and elementwise kernels: fine
        _refused(lambda: x @ x,  # cuBLAS's first call
                 test_a_library_s_first_use_inside_a_capture_is_refused_until_warmed_up,
                 "# cuBLAS's first call", "cuBLAS initialised")
    with emulated_cuda():
        x = torch.ones(8, 8, device="cuda")
        x @ x  # warm-up
        graph = _captured(lambda: x @ x)
        graph.replay()


def test_a_replay_reading_an_input_freed_since_the_capture_is_caught() -> None:
    with emulated_cuda():
        kept, held = torch.ones(4, device="cuda"), [torch.ones(4, device="cuda")]
        out = torch.empty(4, device="cuda")
        graph = _captured(lambda: torch.add(kept, held[0], out=out))
        graph.replay()
        assert out.cpu().tolist() == [2.0] * 4
        held.clear()  # the program drops it; the graph still reads its address
        with pytest.raises(CudaEmulationError) as err:
            graph.replay()  # the stale read
    assert err.value.kind == "capture" and "freed since" in str(err.value)
    line = line_of(test_a_replay_reading_an_input_freed_since_the_capture_is_caught,
                   "# the stale read")
    assert err.value.where.startswith(f"{HERE}:{line} ")
