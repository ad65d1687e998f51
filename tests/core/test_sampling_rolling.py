"""Finished items leave the pass, and a rolling batch admits waiting items at their own step 0:
each item's tokens and generator state equal its own B = 1 run, whatever runs beside it."""

from __future__ import annotations

import pytest
import torch

from ladr_core import LADR, PRESETS, Baseline, KnownTokens, Prophet, ProphetPolicy, sample
from tests.kit.fakes import LocalityDenoiser, make_table
from tests.kit.syncs import SyncCounter, sampler_reads

GRID, K = (6, 6), 8
N = GRID[0] * GRID[1]
STRATEGIES = {
    "baseline": Baseline(), "ladr-paper": LADR(),
    "ladr-nano": LADR(PRESETS["nano"].policy), "ladr-adaptive": LADR(PRESETS["adaptive"].policy),
    "prophet": Prophet(ProphetPolicy(thresholds=(4.0, 3.0, 2.0))),
}


class ItemDenoiser(LocalityDenoiser):
    """LocalityDenoiser that is sent only the items still running (`items=`): row r of a call
    is item items[r], with that item's logit table. Records the items of every call."""

    def __init__(self, table: torch.Tensor, grid: tuple[int, int], coupling: float = 1.5) -> None:
        super().__init__(table, grid, coupling)
        self.sent: list[list[int]] = []

    def __call__(self, tokens: torch.Tensor, masked: torch.Tensor,
                 items: list[int] | None = None) -> torch.Tensor:
        items = list(range(self.table.shape[0])) if items is None else list(items)
        self.sent.append(items)
        return LocalityDenoiser(self.table[items], self.grid, self.coupling)(tokens, masked)


def _gens(seeds: list[int]) -> list[torch.Generator]:
    return [torch.Generator().manual_seed(s) for s in seeds]


def _singles(table: torch.Tensor, strategy, steps: int, seeds: list[int], **kw) -> list:
    out = []
    for i, seed in enumerate(seeds):
        g = torch.Generator().manual_seed(seed)
        known = kw.get("known")
        one_known = None if known is None else KnownTokens(known.tokens[i:i + 1],
                                                            known.generate[i:i + 1])
        res = sample(LocalityDenoiser(table[i:i + 1], GRID), (1, *GRID), steps, strategy,
                     temperature=kw.get("temperature", 1.0), generator=g, known=one_known)
        out.append((res, g))
    return out


@pytest.mark.parametrize("name", list(STRATEGIES))
@pytest.mark.parametrize("max_batch", [None, 2, 3])
def test_every_item_equals_its_single_run(name: str, max_batch: int | None) -> None:
    b, steps = 7, 24
    table = make_table(b, N, K, seed=11, scale=1.5)
    seeds = list(range(100, 100 + b))
    den = ItemDenoiser(table, GRID)
    gens = _gens(seeds)
    res = sample(den, (b, *GRID), steps, STRATEGIES[name], generator=gens, max_batch=max_batch)
    for i, (one, g) in enumerate(_singles(table, STRATEGIES[name], steps, seeds)):
        assert torch.equal(res.tokens[i], one.tokens[0]), f"item {i}"
        assert torch.equal(gens[i].get_state(), g.get_state()), f"item {i}'s draws"
        assert res.item_nfe[i] == one.nfe, f"item {i}"
    # never more items in a pass than max_batch, each item in as many passes as its own run
    assert max(len(s) for s in den.sent) <= (max_batch or b)
    assert sum(len(s) for s in den.sent) == sum(res.item_nfe)


def test_finished_items_leave_the_pass() -> None:
    """Prophet commits a confident item at its first step: it is not sent again."""
    table = torch.cat([make_table(1, N, K, seed=1, scale=20.0),
                       make_table(2, N, K, seed=2, scale=0.05)])
    den = ItemDenoiser(table, GRID, coupling=0.0)
    res = sample(den, (3, *GRID), 12, Prophet(ProphetPolicy(thresholds=(2.0, 2.0, 2.0))),
                 generator=_gens([1, 2, 3]))
    assert den.sent[0] == [0, 1, 2] and all(0 not in s for s in den.sent[1:])
    assert res.item_nfe[0] == 1 and min(res.item_nfe[1:]) > 1


def test_a_rolling_batch_admits_items_in_order_and_keeps_the_order_of_results() -> None:
    b = 5
    table = make_table(b, N, K, seed=3)
    den = ItemDenoiser(table, GRID)
    records: list[dict] = []
    res = sample(den, (b, *GRID), 16, LADR(PRESETS["nano"].policy), generator=_gens(range(b)),
                 max_batch=2, callback=records.append)
    first_seen = [min(c for c, s in enumerate(den.sent) if i in s) for i in range(b)]
    assert first_seen == sorted(first_seen) and den.sent[0] == [0, 1]
    assert res.tokens.shape == (b, N)
    assert all(len(r["items"]) == 2 and r["batch"] == b for r in records)
    assert records[-1]["done"] >= b - 2
    # a joining item starts at its own step 0
    joined = [(r["item_step"][s].item(), item) for r in records
              for s, item in enumerate(r["items"]) if item >= 2]
    assert min(step for step, _ in joined) == 0


def test_known_tokens_roll_with_their_items() -> None:
    b, steps = 4, 12
    g = torch.Generator().manual_seed(5)
    generate = torch.rand(b, N, generator=g) < 0.6
    generate[2] = False  # an item with nothing to generate: it joins and leaves at once
    known = KnownTokens(torch.randint(0, K, (b, N), generator=g), generate)
    table = make_table(b, N, K, seed=6)
    seeds = [7, 8, 9, 10]
    res = sample(ItemDenoiser(table, GRID), (b, *GRID), steps, LADR(), generator=_gens(seeds),
                 known=known, max_batch=2)
    for i, (one, _) in enumerate(_singles(table, LADR(), steps, seeds, known=known)):
        assert torch.equal(res.tokens[i], one.tokens[0]), f"item {i}"
        assert torch.equal(res.tokens[i][~generate[i]], known.tokens[i][~generate[i]])
    assert res.item_nfe[2] == 0


def test_still_one_host_sync_per_step_with_items_leaving_and_joining() -> None:
    den = ItemDenoiser(make_table(6, N, K, seed=4), GRID)
    with SyncCounter() as counter:
        res = sample(den, (6, *GRID), 16, LADR(PRESETS["nano"].policy), generator=_gens(range(6)),
                     max_batch=3)
    assert counter.total <= res.steps, dict(counter.counts)
    den = ItemDenoiser(make_table(2, N, K, seed=4), GRID)
    with SyncCounter() as counter:
        res = sample(den, (2, *GRID), 16, Baseline(), generator=_gens([0, 1]))
    assert counter.total == sampler_reads(res.steps, 16)


def test_bad_max_batch_is_named() -> None:
    den = ItemDenoiser(make_table(2, N, K), GRID)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="max_batch must be None or an int >= 1"):
            sample(den, (2, *GRID), 8, generator=_gens([0, 1]), max_batch=bad)
    plain = LocalityDenoiser(make_table(2, N, K), GRID)
    with pytest.raises(ValueError, match="max_batch=1 < B=2 makes a rolling batch, which needs "
                       "a denoiser that takes items="):
        sample(plain, (2, *GRID), 8, max_batch=1)
