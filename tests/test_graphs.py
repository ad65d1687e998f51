"""ladr_core.graphs off the GPU: when it applies, and the eager fallback when a capture fails.
The capture itself is checked on a GPU by tests/test_gpu.py."""

from __future__ import annotations

import pytest
import torch

from ladr_core import graphs
from ladr_core.graphs import StepGraph, step_graph
from ladr_core.noise import StepNoise
from ladr_core.step import Commit, Stats


def rule(step: int, masked: torch.Tensor, stats: Stats, noise: StepNoise) -> Commit:
    return Commit(masked & (stats.top1 < 0.5), stats.sampled, torch.zeros_like(masked),
                  masked.sum(dim=1).double(), torch.zeros(masked.shape[0], dtype=torch.long))


def test_only_a_step_invariant_rule_on_cuda_is_captured(monkeypatch: pytest.MonkeyPatch) -> None:
    assert step_graph(rule, torch.device("cpu"), True) is None
    assert step_graph(rule, torch.device("cuda"), False) is None
    assert isinstance(step_graph(rule, torch.device("cuda"), True), StepGraph)
    monkeypatch.setattr(graphs, "ENABLED", False)
    assert step_graph(rule, torch.device("cuda"), True) is None


def test_a_refused_capture_falls_back_to_the_eager_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: StepGraph, *args: object) -> None:
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(StepGraph, "_capture", refuse)
    graph = StepGraph(rule, torch.device("cuda"))
    masked = torch.tensor([[True, True, False, True]])
    stats = Stats(torch.tensor([[3, 1, 2, 0]]), top1=torch.tensor([[0.9, 0.1, 0.0, 0.4]]))
    with pytest.warns(UserWarning, match="could not be captured as a CUDA graph"):
        first = graph(1, masked, stats, StepNoise())
    second = graph(2, masked, stats, StepNoise())  # no second try, no second warning
    want = rule(1, masked, stats, StepNoise())
    for out in (first, second):
        assert torch.equal(out.masked, want.masked) and torch.equal(out.tokens, want.tokens)
    assert graph.failed and graph.graph is None
