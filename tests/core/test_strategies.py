"""Selection rules in isolation: batched, sync-free versions equal their per-item definitions."""

from __future__ import annotations

import math

import pytest
import torch

from ladr_core import LADRPolicy, ProphetPolicy, get_schedule
from ladr_core.strategies.baseline import baseline_keep, baseline_remask
from ladr_core.strategies.ladr import LADR
from ladr_core.strategies.prophet import prophet_fire
from ladr_core.strategies.rescue import paper_rescue
from ladr_core.strategies.select import keep_lowest, take_highest


def official_mask_by_random_topk(keep_n: int, confidence: torch.Tensor) -> torch.Tensor:
    """Official rule over the L masked confidences [L]: stay masked if < sorted[clamp(k, 0, L-1)]."""
    sorted_conf = torch.sort(confidence).values
    k = min(max(keep_n, 0), confidence.numel() - 1)
    return confidence < sorted_conf[k]


def test_baseline_remask_equals_official_per_item_including_ties() -> None:
    g = torch.Generator().manual_seed(0)
    for trial in range(40):
        b, n = 3, 12
        masked = torch.rand(b, n, generator=g) < 0.7
        conf = torch.randint(0, 4 if trial % 2 else 1000, (b, n), generator=g).float()
        keep = torch.tensor(trial % 14)
        got = baseline_remask(masked, conf, keep)
        for i in range(b):
            idx = masked[i].nonzero().flatten()
            want = torch.zeros(n, dtype=torch.bool)
            if len(idx):
                want[idx] = official_mask_by_random_topk(int(keep), conf[i, idx])
            assert torch.equal(got[i], want), (trial, i)


def test_keep_lowest_keeps_exactly_count_least_confident_masked() -> None:
    score = torch.tensor([[0.9, 0.1, 0.5, 0.05, 0.7, 0.3]])
    masked = torch.tensor([[True, True, True, False, True, True]])
    kept = keep_lowest(score, masked, torch.tensor([2]))
    # 0.05 is decoded and must never be re-selected; the two least confident masked stay
    assert kept.tolist() == [[False, True, False, False, False, True]]
    assert keep_lowest(score, masked, torch.tensor([0])).sum() == 0
    assert torch.equal(keep_lowest(score, masked, torch.tensor([9])), masked)


def test_keep_lowest_batched_counts_and_stable_ties() -> None:
    score = torch.zeros(2, 5)
    masked = torch.ones(2, 5, dtype=torch.bool)
    kept = keep_lowest(score, masked, torch.tensor([1, 3]))
    assert kept.tolist() == [[True, False, False, False, False], [True, True, True, False, False]]


def test_take_highest_respects_pool() -> None:
    score = torch.tensor([[5.0, 4.0, 3.0, 2.0]])
    pool = torch.tensor([[False, True, True, True]])
    assert take_highest(score, pool, torch.tensor([2])).tolist() == [[False, True, True, False]]


def test_baseline_keep_matches_official_formula() -> None:
    for n, steps in [(16, 4), (1024, 64), (4096, 20), (3, 8)]:
        table = baseline_keep(n, torch.arange(steps), steps, get_schedule()).tolist()
        want = []
        for s in range(steps - 1):
            frac = torch.cos(0.5 * math.pi * torch.tensor([(s + 1) / steps]))
            want.append(int((torch.tensor([[n]]).float() * frac).floor().clamp_min(1)))
        assert table == want + [0]
        # per item: each at its own step with its own count, as in a rolling batch
        counts = torch.tensor([n, max(1, n // 2)])
        mixed = baseline_keep(counts, torch.tensor([0, steps - 2]), steps, get_schedule())
        assert mixed.tolist() == [want[0], baseline_keep(max(1, n // 2), torch.tensor(
            [steps - 2]), steps, get_schedule()).item()]


def _tables(policy: LADRPolicy) -> LADR:
    return LADR(policy)


def ladr_rescue(m_std, top1, margin, phase, ladr: LADR, grid, uniform) -> torch.Tensor:
    """Algorithm 1 lines 22-31 of `ladr` (rescue.paper_rescue) with the arguments in test order."""
    return paper_rescue(ladr.policy, m_std, m_std, top1, margin, phase, grid, uniform)


ladr_keep_counts = LADR.keep_count


def test_ladr_rescue_budget_threshold_and_ranking() -> None:
    # 1 x 5 strip, position 0 decoded; frontier of m_std = {1}. Make a 3 x 3 to have more.
    m_std = torch.ones(1, 9, dtype=torch.bool)
    m_std[0, 4] = False  # centre decoded -> frontier = the 8 neighbours
    margin = torch.tensor([[0.9, 0.01, 0.8, 0.7, 0.0, 0.6, 0.02, 0.5, 0.4]])
    top1 = margin.clone()
    phase = torch.tensor([1])  # structure: tau 0.05, alpha 0.3 -> floor(8 * 0.3) = 2
    r = ladr_rescue(m_std, top1, margin, phase, _tables(LADRPolicy()), (3, 3), None)
    assert r.nonzero()[:, 1].tolist() == [0, 2]
    phase = torch.tensor([2])  # refinement: no tau, alpha 1 -> all 8
    r = ladr_rescue(m_std, top1, margin, phase, _tables(LADRPolicy()), (3, 3), None)
    assert r.sum() == 8 and not r[0, 4]
    phase = torch.tensor([0])  # exploration: alpha 0.1 -> floor(0.8) = 0
    assert ladr_rescue(m_std, top1, margin, phase, _tables(LADRPolicy()), (3, 3), None).sum() == 0
    tight = LADRPolicy(tau=(0.05, 0.75, None))  # only 0.9 and 0.8 clear 0.75; budget 2
    r = ladr_rescue(m_std, top1, margin, torch.tensor([1]), _tables(tight), (3, 3), None)
    assert r.nonzero()[:, 1].tolist() == [0, 2]
    tighter = LADRPolicy(tau=(0.05, 0.85, None))  # only 1 valid -> k_res = min(2, 1)
    r = ladr_rescue(m_std, top1, margin, torch.tensor([1]), _tables(tighter), (3, 3), None)
    assert r.nonzero()[:, 1].tolist() == [0]


def test_ladr_ablations_same_budget_different_choice() -> None:
    # 5 x 5 grid, decoded corner 0 -> frontier {1, 5, 6}; everything else off-frontier
    m_std = torch.ones(1, 25, dtype=torch.bool)
    m_std[0, 0] = False
    margin = torch.linspace(0.1, 0.9, 25).unsqueeze(0)
    top1 = 1.0 - margin
    phase = torch.tensor([2])  # alpha 1 -> budget 3
    conf = ladr_rescue(m_std, top1, margin, phase, _tables(LADRPolicy(metric="confidence")),
                       (5, 5), None)
    assert conf.nonzero()[:, 1].tolist() == [1, 5, 6]
    nn = ladr_rescue(m_std, top1, margin, phase, _tables(LADRPolicy(candidates="non_neighbors")),
                     (5, 5), None)
    assert nn.nonzero()[:, 1].tolist() == [22, 23, 24]  # top margins off the frontier
    uniform = torch.rand(1, 25, generator=torch.Generator().manual_seed(0))
    rnd = ladr_rescue(m_std, top1, margin, phase, _tables(LADRPolicy(candidates="random")),
                      (5, 5), uniform)
    assert rnd.sum() == 3 and not rnd[0, 0]
    assert rnd.nonzero()[:, 1].tolist() == sorted(
        uniform[0].masked_fill(~m_std[0], -1).topk(3).indices.tolist())


def test_non_neighbors_falls_back_to_frontier_when_exhausted() -> None:
    m_std = torch.ones(1, 9, dtype=torch.bool)
    m_std[0, 4] = False  # every masked token is on the frontier
    margin = torch.full((1, 9), 0.5)
    r = ladr_rescue(m_std, margin, margin, torch.tensor([2]),
                    _tables(LADRPolicy(candidates="non_neighbors")), (3, 3), None)
    assert r.sum() == 8


def test_ladr_keep_counts_last_step_and_clamp() -> None:
    sched = get_schedule()
    masked = torch.ones(2, 16, dtype=torch.bool)
    masked[1, :10] = False
    t_eff = sched.gamma_inv(masked.sum(1).double() / 16)
    n = ladr_keep_counts(masked, t_eff, torch.tensor([0, 0]), 4, sched)
    want = [math.floor(16 * math.cos(math.pi / 8)),
            math.floor(16 * sched.gamma(sched.gamma_inv(6 / 16) + 0.25))]
    assert n.tolist() == want
    assert ladr_keep_counts(masked, t_eff, torch.tensor([3, 3]), 4, sched).tolist() == [0, 0]
    # each item at its own step (a rolling batch): only the item on its last step keeps none
    assert ladr_keep_counts(masked, t_eff, torch.tensor([1, 3]), 4, sched).tolist() == [want[0], 0]


def test_prophet_thresholds_per_item_equal_the_scalar_rule() -> None:
    q = ProphetPolicy(thresholds=(3.0, 2.0, 1.0), progress_bounds=(0.25, 0.5))
    step = torch.arange(12)
    assert q.thresholds_at(step, 12).tolist() == [q.threshold(s / 12) for s in range(12)]


def test_prophet_fire_uses_mean_gap_over_masked_only() -> None:
    gap = torch.tensor([[10.0, 10.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0], [9.0, 9.0, 9.0, 9.0]])
    masked = torch.tensor([[True, True, False, False], [True, True, True, True],
                           [False, False, False, False]])
    assert prophet_fire(masked, gap, 5.0).tolist() == [True, False, False]


@pytest.mark.parametrize("k", [1, 3, 5])
def test_tables_phase(k: int) -> None:
    t = _tables(LADRPolicy(kernel_size=k))
    assert t.phase(torch.tensor([0.0, 0.19, 0.2, 0.69, 0.7, 1.0])).tolist() == [0, 0, 1, 1, 2, 2]
