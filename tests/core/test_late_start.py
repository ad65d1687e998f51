"""A late start (StepSchedule(T, denoise < 1)) and ladr_core.strength: image to image by a
denoise strength, in the core, with no wrapper: the loop starts at the schedule's step s0.

A run cut at step s0 and continued from the state it had (tokens, mask, generator states) on
the schedule started at s0 equals the uninterrupted run for every strategy whose rule reads
only that state; every registered strategy and LADR preset continued from the re-masked picture
unmasks everything by step T - 1; the strength's start step and re-masked count follow the
official keep formula.
"""

from __future__ import annotations

import math

import pytest
import torch

from ladr_core import InputError, KnownTokens, StepSchedule, check_denoise, resolve_strategy, sample
from ladr_core.registry import preset_names, strategy_names
from ladr_core.schedules import get_schedule
from ladr_core.strength import remask_count, remask_positions
from tests.kit.fakes import LocalityDenoiser, make_table

GRID = (6, 6)
N = 36
K = 12
ALL = [*strategy_names(), *preset_names()]
WHOLE = torch.ones(2, N, dtype=torch.bool)  # the schedule counts over the whole picture


def late(steps: int, start: int) -> StepSchedule:
    """The schedule of T = steps whose denoise starts it at `start`."""
    plan = StepSchedule(steps, (steps - start) / steps)
    assert plan.start == start
    return plan


def _den(batch: int = 2) -> LocalityDenoiser:
    return LocalityDenoiser(make_table(batch, N, K, seed=4), GRID)


def _state_at(strategy: object, steps: int, start: int) -> tuple[torch.Tensor, dict]:
    """An uninterrupted 2-item run's tokens, and its state when step `start` begins: the
    committed tokens, the mask and each item's generator state."""
    gens = [torch.Generator().manual_seed(10 + i) for i in range(2)]
    state: dict = {}

    def keep(record: dict) -> None:
        if record["step"] == start - 1:
            state.update(tokens=record["tokens"].clone(), masked=record["masked"].clone(),
                         gens=[g.get_state() for g in gens])

    res = sample(_den(), (2, *GRID), steps, strategy=strategy, generator=gens, callback=keep)
    return res.tokens, state


def _rule_reads_only_the_state(name: str) -> bool:
    """Strategies whose rule keeps nothing of its own across steps (nano's seen_only LADR
    remembers which tokens it has predicted, so a cut run forgets that)."""
    policy = getattr(resolve_strategy(name), "policy", None)
    return not getattr(policy, "seen_only", False)


@pytest.mark.parametrize("name", [n for n in ALL if _rule_reads_only_the_state(n)])
def test_a_run_continued_from_its_own_state_equals_the_uninterrupted_run(name: str) -> None:
    strategy = resolve_strategy(name)
    steps = 12
    start = steps // 3
    full, state = _state_at(strategy, steps, start)
    if not state or not state["masked"].any():
        pytest.skip(f"{name} finished before step {start}")
    gens = []
    for g_state in state["gens"]:
        g = torch.Generator()
        g.set_state(g_state)
        gens.append(g)
    res = sample(_den(), (2, *GRID), late(steps, start), strategy=strategy, generator=gens,
                 known=KnownTokens(state["tokens"], state["masked"], WHOLE))
    assert torch.equal(res.tokens, full)


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("denoise", [0.3, 0.75])
def test_every_strategy_continues_a_remasked_picture_to_the_end(name: str, denoise: float
                                                                ) -> None:
    """The picture's codes with the official share re-masked: the run takes at most T - s0
    steps, unmasks everything, keeps the rest of the picture, and its records name the
    strategy."""
    strategy = resolve_strategy(name)
    plan = StepSchedule(16, denoise)
    steps, start = plan.steps, plan.start
    picture = torch.randint(0, K, (2, N), generator=torch.Generator().manual_seed(1))
    count = remask_count(N, start, steps)
    gens = [torch.Generator().manual_seed(i) for i in range(2)]
    chosen = remask_positions(torch.ones(2, N, dtype=torch.bool), [count, count], gens)
    records: list[dict] = []
    res = sample(_den(), (2, *GRID), plan, strategy=strategy,
                 generator=[torch.Generator().manual_seed(i) for i in range(2)],
                 known=KnownTokens(picture, chosen, WHOLE), callback=records.append)
    assert res.steps <= steps - start and not records[-1]["masked"].any()
    assert torch.equal(res.tokens[~chosen], picture[~chosen])
    assert {r["strategy"] for r in records} == {strategy.name}


@pytest.mark.parametrize("steps", [10, 64, 128])
@pytest.mark.parametrize("denoise", [0.001, 0.01, 0.25, 0.5, 0.6, 0.75, 1.0])
def test_the_start_step_and_the_remasked_count_follow_the_official_schedule(
        steps: int, denoise: float) -> None:
    start = StepSchedule(steps, denoise).start
    assert start == steps - math.floor(steps * denoise + 0.5)
    gamma = get_schedule("cosine").gamma
    for total in (1, 36, 144):
        count = remask_count(total, start, steps)
        if start == 0:
            assert count == total
        elif start == steps:
            assert count == 0
        else:  # the official keep table at t = s0 / T, evaluated as baseline_keep does
            t = torch.tensor(start / steps, dtype=torch.float32)
            assert count == max(1, int(math.floor(total * float(gamma(t)))))
    assert remask_count(0, start, steps) == 0


def test_remasked_positions_lie_in_the_region_and_follow_their_own_generator() -> None:
    region = torch.zeros(3, N, dtype=torch.bool)
    region[:, 6:30] = True
    region[2] = False
    region[2, :5] = True

    def draw(seed: int) -> torch.Tensor:
        return remask_positions(region, [10, 10, 5],
                                [torch.Generator().manual_seed(seed + i) for i in range(3)])

    out = draw(0)
    assert out.sum(dim=1).tolist() == [10, 10, 5] and not (out & ~region).any()
    assert torch.equal(out, draw(0)) and not torch.equal(out[:2], draw(1)[:2])


@pytest.mark.parametrize("bad", ["0.5", float("nan"), float("inf"), -0.1, 0, 0.0, 1.01, True,
                                 None])
def test_a_bad_denoise_is_one_error_naming_it(bad: object) -> None:
    for check in (check_denoise, lambda d: StepSchedule(12, d)):
        with pytest.raises(InputError, match=r"^denoise is .*; give a number above 0 and at "
                                             r"most 1"):
            check(bad)


@pytest.mark.parametrize("bad", [0, -3, 1001, 12.0, "12", True, None])
def test_a_bad_steps_is_one_error_naming_it(bad: object) -> None:
    with pytest.raises(InputError, match=r"^steps is .*; give a whole number of steps from 1 "
                                         r"to 1000"):
        StepSchedule(bad)  # type: ignore[arg-type]


def test_a_late_start_needs_the_picture_and_a_step_to_run() -> None:
    with pytest.raises(ValueError, match="^steps: a schedule started at step 6 of 12"):
        sample(_den(), (2, *GRID), StepSchedule(12, 0.5), strategy="baseline")


@pytest.mark.parametrize("name", ["baseline", "ladr", "halton", "nano"])
def test_in_a_rolling_batch_each_item_equals_its_own_run(name: str) -> None:
    """Items with regions of different sizes roll through one slot pair: the region count the
    rule counts over follows each slot's item (RunInfo.total, in place)."""
    strategy = resolve_strategy(name)
    plan = StepSchedule(16, 0.5)
    steps, start = plan.steps, plan.start
    region = torch.zeros(3, N, dtype=torch.bool)
    for i, width in enumerate((6, 3, 5)):
        region[i].view(GRID)[:, :width] = True
    totals = [int(c) for c in region.sum(dim=1)]
    chosen = remask_positions(region, [remask_count(t, start, steps) for t in totals],
                              [torch.Generator().manual_seed(i) for i in range(3)])
    picture = torch.randint(0, K, (3, N), generator=torch.Generator().manual_seed(2))
    table = make_table(3, N, K, seed=4)

    def run(items: list[int], max_batch: int | None = None) -> torch.Tensor:
        def den(tokens: torch.Tensor, masked: torch.Tensor, items: list[int] | None = None
                ) -> torch.Tensor:  # sent only the rolling batch's running items
            rows = table[chosen_items] if items is None else table[items]
            return LocalityDenoiser(rows, GRID)(tokens, masked)

        chosen_items = items
        return sample(den, (len(items), *GRID), plan, strategy=strategy,
                      generator=[torch.Generator().manual_seed(7 + i) for i in items],
                      known=KnownTokens(picture[items], chosen[items], region[items]),
                      max_batch=max_batch).tokens

    rolled = run([0, 1, 2], max_batch=2)
    for i in range(3):
        assert torch.equal(rolled[i], run([i])[0]), i
    assert torch.equal(rolled[~region], picture[~region])
