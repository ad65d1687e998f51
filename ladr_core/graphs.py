"""A strategy's per-step rule replayed as one CUDA graph (GPU only; everywhere else a no-op).

At B = 1 on a GPU a step is bound by the host: LADR's rule is 40-90 kernels over [B, N]
tensors of a few KB, and launching them takes the CPU longer than the GPU needs to run them.
Captured once per run and replayed, it costs one launch plus its input and output copies.

Only a rule that reads no host value changing from step to step is captured
(`Strategy.step_invariant`: it reads each item's step as the tensor it is given): step 0 runs
eagerly (warming lazily allocated state), step 1 captures and replays, every later step
replays. The slots' shapes never change within a run (a rolling batch updates steps and
counts in place), so one capture serves the run, and a replay runs the eager rule's kernels in
order: the same results. The capture makes no host sync (no `torch.cuda.graph` context, which
synchronises and empties the allocator's cache). `sample(..., cuda_graph=False)` runs eagerly.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from typing import Any

import torch

from .noise import StepNoise
from .step import Commit, Stats, StepRule

_COMMIT_FIELDS = ("masked", "tokens", "rescued", "t_eff", "phase")


def _tensors(stats: Stats, noise: StepNoise) -> list[torch.Tensor | None]:
    return ([getattr(stats, f.name) for f in dataclasses.fields(stats)]
            + [noise.sampled, noise.remask, noise.uniform])


class StepGraph:
    """``rule`` for one run on one CUDA device, captured at its first call and replayed after.

    The tensors of the first call become the graph's inputs: each later call copies its tensors
    into them. The rule's outputs live in the graph's memory pool and are overwritten by the
    next replay, so each call returns copies.
    """

    def __init__(self, rule: StepRule, device: torch.device) -> None:
        self.rule, self.device = rule, device
        self.graph: Any = None
        self.inputs: list[torch.Tensor | None] = []
        self.output: Commit | None = None
        self.failed = False

    def __call__(self, step: torch.Tensor, masked: torch.Tensor, stats: Stats,
                 noise: StepNoise) -> Commit:
        if self.failed:
            return self.rule(step, masked, stats, noise)
        if self.graph is None:
            try:
                self._capture(step, masked, stats, noise)
            except RuntimeError as exc:  # a capture this build or allocator refuses: run eagerly
                self.failed = True
                warnings.warn(f"LADR: the step rule could not be captured as a CUDA graph "
                              f"({exc}); this run continues without it", stacklevel=2)
                return self.rule(step, masked, stats, noise)
        else:
            for static, new in zip(self.inputs, [step, masked, *_tensors(stats, noise)],
                                   strict=True):
                if (static is None) != (new is None):
                    raise RuntimeError("the step's statistics changed kind within one run")
                if static is not None and static is not new:
                    static.copy_(new)
        self.graph.replay()
        return Commit(*(getattr(self.output, f).clone() for f in _COMMIT_FIELDS))

    def _capture(self, step: torch.Tensor, masked: torch.Tensor, stats: Stats,
                 noise: StepNoise) -> None:
        self.inputs = [step, masked, *_tensors(stats, noise)]
        self.graph, self.output = self.record(lambda: self.rule(step, masked, stats, noise),
                                              self.device)

    @staticmethod
    def record(fn: Callable[[], Commit], device: torch.device) -> tuple[Any, Commit]:
        """(graph, output): ``fn`` captured as a CUDA graph on a side stream that waits for the
        current one (event waits only); ``fn`` does not run until ``graph.replay()``. The tests
        swap in a recorder that replays by calling ``fn`` again, to check the input copies and
        output clones above on a CPU."""
        current = torch.cuda.current_stream(device)
        side = torch.cuda.Stream(device)
        side.wait_stream(current)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.stream(side):
            graph.capture_begin(capture_error_mode="thread_local")
            try:
                output = fn()
            finally:
                graph.capture_end()
        current.wait_stream(side)
        return graph, output


def step_graph(rule: StepRule, device: torch.device, step_invariant: bool,
               enabled: bool = True) -> StepGraph | None:
    """A StepGraph for this run, or None where none applies (not CUDA, a rule that reads the
    step index, or `enabled` False: sample's `cuda_graph`)."""
    if not (enabled and step_invariant and device.type == "cuda"):
        return None
    return StepGraph(rule, device)


__all__ = ["StepGraph", "step_graph"]
