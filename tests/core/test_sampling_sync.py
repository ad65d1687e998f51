"""At most one host synchronisation per sampling step, for every strategy.

Syncs are counted by tests.kit.syncs.SyncCounter (the benchmarks' counter too): aten ops that need
a value or shape on the host, and Tensor methods that copy to host memory (`.tolist()` on a CPU
tensor dispatches no aten op, but on an accelerator it is a device -> host sync), with and
without known tokens; and no strategy copies host data to the device.
"""

from __future__ import annotations

import pytest
import torch
from support import strategy_from

from ladr_core import (
    LADR,
    PRESETS,
    KnownTokens,
    LADRPolicy,
    resolve_strategy,
    sample,
    strategy_names,
)
from tests.kit.fakes import LocalityDenoiser, make_table
from tests.kit.syncs import HostData, SyncCounter, sampler_reads

# Every registered strategy beyond the three the lists below spell out, with its defaults
# (a new strategy joins these checks by registering).
OTHERS = [n for n in strategy_names() if n not in ("baseline", "ladr", "prophet")]


@pytest.mark.parametrize(
    ("strategy", "policy"),
    [("baseline", None), ("prophet", None), ("ladr", LADRPolicy()),
     ("ladr", LADRPolicy(candidates="non_neighbors")), ("ladr", LADRPolicy(candidates="random")),
     ("ladr", LADRPolicy(metric="random")), ("ladr", LADRPolicy(metric="confidence")),
     ("ladr", LADRPolicy(selection="gumbel", rescue_token="argmax", seen_only=True)),
     ("ladr", PRESETS["adaptive"].policy),
     *[(name, None) for name in OTHERS]],
)
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_at_most_one_host_sync_per_step(strategy, policy, temperature) -> None:
    den = LocalityDenoiser(make_table(2, 64, 12, seed=1), (8, 8))
    gens = [torch.Generator().manual_seed(i) for i in range(2)]
    with SyncCounter() as syncs:
        res = sample(den, (2, 8, 8), 12, strategy=strategy_from(strategy, policy),
                     temperature=temperature, generator=gens, callback=lambda r: None)
    assert res.steps >= 2
    assert syncs.total <= res.steps, syncs.counts
    # Exactly the one transfer of the masked counts per step (none after the last step), which
    # serves the early exit and sizes the next step's masked-row gather and noise draws.
    assert dict(syncs.counts) == {"Tensor.tolist": sampler_reads(res.steps, 12)}


@pytest.mark.parametrize("strategy", ["baseline", "prophet", "ladr", *OTHERS])
def test_sampling_from_known_tokens_reads_the_host_once_more(strategy) -> None:
    """Painting: one transfer before the loop (the known tokens' per-item counts and range),
    then the loop's one read per step, for every strategy (counted by the function mode,
    which sees `.tolist()`, `.cpu()`, `.numpy()` on a CPU tensor too)."""
    den = LocalityDenoiser(make_table(2, 64, 12, seed=1), (8, 8))
    gens = [torch.Generator().manual_seed(i) for i in range(2)]
    picture = torch.randint(0, 12, (2, 64), generator=torch.Generator().manual_seed(5))
    generate = torch.zeros(2, 64, dtype=torch.bool)
    generate[:, 16:48] = True
    with SyncCounter() as syncs:
        res = sample(den, (2, 8, 8), 12, strategy=strategy, generator=gens,
                     known=KnownTokens(picture, generate))
    assert dict(syncs.counts) == {"Tensor.tolist": 1 + sampler_reads(res.steps, 12)}


def test_counter_detects_host_data() -> None:
    with HostData() as made:
        torch.tensor([0.05, 0.05, -1.0])
        torch.where(torch.ones(2, dtype=torch.bool), 0.5, torch.zeros(2))  # a kernel scalar
        torch.arange(1, 5, dtype=torch.float64) / 4
    assert made.made == ["aten.lift_fresh.default"]


@pytest.mark.parametrize("strategy", ["baseline", "prophet", *sorted(PRESETS), *OTHERS])
def test_sample_copies_no_host_data_to_the_device(strategy) -> None:
    """No fixed sync inside sample() on an accelerator: policy tables, the baseline keep
    table and the Halton order are built on the device, per-phase values enter kernels as
    scalars."""
    chosen = resolve_strategy(strategy) if strategy in strategy_names() else LADR.preset(strategy)
    den = LocalityDenoiser(make_table(2, 64, 12, seed=1), (8, 8))
    gens = [torch.Generator().manual_seed(i) for i in range(2)]
    with HostData() as made:
        sample(den, (2, 8, 8), 12, strategy=chosen, temperature=1.0, generator=gens)
    assert made.made == []
