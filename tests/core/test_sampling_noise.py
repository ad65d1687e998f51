"""Noise is drawn only for the masked rows (ladr_core/noise.py draw order), item by item.

Each test replays the documented draws on a fresh generator from the masked counts the step
records report, and requires the sampler's generator to end in exactly that state: no draw for
a decoded position, none for an item that has finished, none at temperature 0.
"""

from __future__ import annotations

import pytest
import torch
from support import strategy_from

from ladr_core import LADR, LADRPolicy, Prophet, ProphetPolicy, sample
from tests.kit.fakes import LocalityDenoiser, make_table

GRID, N, K, STEPS = (6, 6), 36, 10, 8


def _run_with_counts(den, batch: int, seeds: list[int], **kw) -> tuple[list, list[list[int]]]:
    """sample() with one generator per item; returns (generators, masked counts per step start)."""
    gens = [torch.Generator().manual_seed(s) for s in seeds]
    starts: list[list[int]] = []
    current = [N] * batch

    def record(rec: dict) -> None:
        starts.append(list(current))
        current[:] = rec["masked"].sum(dim=1).tolist()

    if "policy" in kw:  # a parametrized (name, policy) pair
        kw["strategy"] = strategy_from(kw["strategy"], kw.pop("policy"))
    sample(den, (batch, *GRID), STEPS, generator=gens, callback=record, **kw)
    return gens, starts


def _replay(seed: int, counts: list[int], gumbel: bool, remask: bool, uniform: bool):  # noqa: ANN202
    """A fresh generator after the documented per-step draws for one item."""
    g = torch.Generator().manual_seed(seed)
    for count in counts:
        if count == 0:
            continue
        if gumbel:
            torch.rand(count, K, generator=g)
        if remask:
            torch.rand(count, generator=g)
        if uniform:
            torch.rand(count, generator=g)
    return g


@pytest.mark.parametrize(
    ("strategy", "policy", "temperature", "draws"),
    [("baseline", None, 1.0, (True, True, False)),
     ("prophet", None, 0.8, (True, True, False)),
     ("ladr", LADRPolicy(), 1.0, (True, False, False)),
     ("ladr", LADRPolicy(candidates="random"), 1.0, (True, False, True)),
     ("ladr", LADRPolicy(metric="random"), 0.0, (False, False, True)),
     ("ladr", LADRPolicy(selection="gumbel"), 1.0, (True, True, False)),
     ("ladr", LADRPolicy(selection="gumbel"), 0.0, (False, False, False))],
    ids=["baseline", "prophet", "ladr", "ladr-random-cand-hot", "ladr-random-metric-greedy",
         "ladr-gumbel-hot", "ladr-gumbel-greedy"],
)
def test_each_item_draws_exactly_for_its_masked_rows(strategy, policy, temperature, draws) -> None:
    den = LocalityDenoiser(make_table(2, N, K, seed=5), GRID)
    gens, starts = _run_with_counts(den, 2, [21, 22], strategy=strategy, policy=policy,
                                    temperature=temperature)
    assert starts[0] == [N, N] and all(0 < c < N for c in starts[1])  # rows really shrink
    for i, g in enumerate(gens):
        replay = _replay(21 + i, [c[i] for c in starts], *draws)
        assert torch.equal(g.get_state(), replay.get_state()), f"item {i}"


def test_a_finished_item_draws_nothing_while_the_batch_goes_on() -> None:
    """Item 0 is confident (Prophet commits it at step 0), item 1 is not: item 0's generator
    ends exactly where its own B=1 run leaves it, and item 1 keeps drawing."""
    table = torch.cat([make_table(1, N, K, seed=1, scale=20.0),
                       make_table(1, N, K, seed=2, scale=0.05)])
    den = LocalityDenoiser(table, GRID, coupling=0.0)
    kw = {"strategy": Prophet(ProphetPolicy(thresholds=(2.0, 2.0, 2.0))), "temperature": 1.0}
    gens, starts = _run_with_counts(den, 2, [7, 8], **kw)
    assert len(starts) == STEPS and all(c[0] == 0 for c in starts[1:])  # item 0 done at step 0
    assert all(c[1] > 0 for c in starts)
    single_gen = torch.Generator().manual_seed(7)
    single = sample(den.item(0), (1, *GRID), STEPS, generator=single_gen, **kw)
    assert single.steps == 1
    assert torch.equal(gens[0].get_state(), single_gen.get_state())
    replay = _replay(8, [c[1] for c in starts], True, True, False)
    assert torch.equal(gens[1].get_state(), replay.get_state())


def test_padded_rows_batch_equals_each_item_alone() -> None:
    """Batched (rows padded to the largest masked count) equals each item alone, tokens and
    random consumption, while the items' masks differ from step 1 on. (That row j is the j-th
    masked position in index order is proven by test_sampling_baseline's official port.)"""
    den = LocalityDenoiser(make_table(3, N, K, seed=9), GRID)
    kw = {"strategy": LADR(LADRPolicy(metric="random")), "temperature": 1.3}
    gens = [torch.Generator().manual_seed(40 + i) for i in range(3)]
    masks: list[torch.Tensor] = []
    batch = sample(den, (3, *GRID), STEPS, generator=gens,
                   callback=lambda r: masks.append(r["masked"]), **kw)
    assert not torch.equal(masks[0][0], masks[0][1])
    for i in range(3):
        g = torch.Generator().manual_seed(40 + i)
        single = sample(den.item(i), (1, *GRID), STEPS, generator=g, **kw)
        assert torch.equal(batch.tokens[i : i + 1], single.tokens)
        assert torch.equal(gens[i].get_state(), g.get_state())


@pytest.mark.parametrize("strategy", ["baseline", "ladr", "prophet"])
def test_row_gather_reads_strided_logits_and_leaves_them_untouched(strategy) -> None:
    """Logits that are a strided view (e.g. the codebook slice of a wider vocabulary) sample
    exactly like their contiguous copy, and the sampler never writes into them."""
    den = LocalityDenoiser(make_table(2, N, K, seed=12), GRID)
    seen: list[tuple[torch.Tensor, torch.Tensor]] = []

    def wide(tokens: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
        full = torch.cat([den(tokens, masked), torch.zeros(2, N, 3)], dim=-1)[..., :K]
        seen.append((full, full.clone()))
        return full

    def run(fn) -> torch.Tensor:  # noqa: ANN001
        gens = [torch.Generator().manual_seed(s) for s in (1, 2)]
        return sample(fn, (2, *GRID), STEPS, strategy=strategy, temperature=1.0,
                      generator=gens).tokens

    assert torch.equal(run(wide), run(den))
    assert not seen[0][0].is_contiguous()
    assert all(torch.equal(view, copy) for view, copy in seen)
