"""ladr_core.graphs off the GPU: when it applies, and the eager fallback when a capture fails.
The capture itself is checked on a GPU by tests/core/test_gpu.py."""

from __future__ import annotations

import pytest
import torch

from ladr_core.graphs import StepGraph, step_graph
from ladr_core.noise import StepNoise
from ladr_core.step import Commit, Stats


def rule(step: torch.Tensor, masked: torch.Tensor, stats: Stats, noise: StepNoise) -> Commit:
    return Commit(masked & (stats.top1 < 0.5), stats.sampled, torch.zeros_like(masked),
                  masked.sum(dim=1).double(), torch.zeros(masked.shape[0], dtype=torch.long))


def test_only_a_step_invariant_rule_on_cuda_is_captured() -> None:
    assert step_graph(rule, torch.device("cpu"), True) is None
    assert step_graph(rule, torch.device("cuda"), False) is None
    assert isinstance(step_graph(rule, torch.device("cuda"), True), StepGraph)
    assert step_graph(rule, torch.device("cuda"), True, enabled=False) is None


def test_a_refused_capture_falls_back_to_the_eager_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: StepGraph, *args: object) -> None:
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(StepGraph, "_capture", refuse)
    graph = StepGraph(rule, torch.device("cuda"))
    masked = torch.tensor([[True, True, False, True]])
    stats = Stats(torch.tensor([[3, 1, 2, 0]]), top1=torch.tensor([[0.9, 0.1, 0.0, 0.4]]))
    with pytest.warns(UserWarning, match="could not be captured as a CUDA graph"):
        first = graph(torch.tensor([1]), masked, stats, StepNoise())
    second = graph(torch.tensor([2]), masked, stats, StepNoise())  # no second try or warning
    want = rule(torch.tensor([1]), masked, stats, StepNoise())
    for out in (first, second):
        assert torch.equal(out.masked, want.masked) and torch.equal(out.tokens, want.tokens)
    assert graph.failed and graph.graph is None


class CallAgain:
    """Stands in for a CUDA graph on a CPU: a replay runs the recorded function again and writes
    its results into the first call's output tensors, as a real replay rewrites the same memory.
    So a step that forgot to load its inputs, or a caller that kept the output tensors instead
    of copies, gives wrong tokens here as it would on a GPU."""

    def __init__(self, fn, output: Commit) -> None:  # noqa: ANN001
        self.fn, self.output, self.replays = fn, output, 0

    def replay(self) -> None:
        new = self.fn()
        for name in ("masked", "tokens", "rescued", "t_eff", "phase"):
            getattr(self.output, name).copy_(getattr(new, name))
        self.replays += 1


def call_again(fn, device: torch.device) -> tuple[CallAgain, Commit]:  # noqa: ANN001
    output = fn()
    return CallAgain(fn, output), output


@pytest.mark.parametrize("preset", [None, "nano", "adaptive", "ablation_random_metric"])
@pytest.mark.parametrize(("batch", "temperature"), [(1, 1.0), (2, 1.0), (2, 0.0)])
def test_a_replayed_rule_gives_the_eager_run(preset: str | None, batch: int,
                                             temperature: float,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from support import strategy_from

    from ladr_core import PRESETS, sample, sampling
    from tests.kit.fakes import varied_denoiser

    denoise = varied_denoiser(batch, 256, 64)  # logits that follow the decoded tokens

    def run() -> tuple:
        records: list = []
        policy = PRESETS[preset].policy if preset else None
        res = sample(denoise, shape=(batch, 16, 16), steps=24, strategy=strategy_from("ladr", policy),
                     temperature=temperature,
                     generator=[torch.Generator().manual_seed(i) for i in range(batch)],
                     callback=lambda r: records.append((r["masked"], r["rescued"], r["tokens"])))
        return res, records

    made: list[StepGraph] = []

    def on_the_cpu(rule, device: torch.device, invariant: bool,  # noqa: ANN001
                   enabled: bool) -> StepGraph:
        made.append(StepGraph(rule, device))
        return made[-1]

    monkeypatch.setattr(StepGraph, "record", staticmethod(call_again))
    monkeypatch.setattr(sampling, "step_graph", on_the_cpu)
    graphed, graphed_records = run()
    monkeypatch.setattr(sampling, "step_graph", lambda *args: None)
    eager, eager_records = run()
    # every step after the first replays the graph, the last one too: the rule reads each
    # item's step as a tensor, so its last-step rule is inside the graph
    assert made[0].graph.replays == graphed.steps - 1 >= 2
    assert graphed.steps == eager.steps and torch.equal(graphed.tokens, eager.tokens)
    for a, b in zip(eager_records, graphed_records, strict=True):
        assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
