"""Self-calibrating rescue (ladr_core.strategies.rescue.adaptive_rescue): threshold from the step's own picks, budget from
the schedule's pace, degenerate margins, ablations, bad input. Checked through sample()'s step
records against values recomputed here from the denoiser's logits."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ladr_core import LADR, PRESETS, AdaptiveRescue, LADRPolicy, sample
from ladr_core.schedules import get_schedule
from ladr_core.strategies.rescue import adaptive_rescue, frontier, pace_cap, subset_quantile
from tests.kit.fakes import LocalityDenoiser, make_table

GRID = (6, 6)
N = 36


def _policy(pace: float = 3.0, q: float = 0.5, **kw) -> LADRPolicy:
    kw = {"selection": "gumbel", "rescue_token": "argmax", "seen_only": True, **kw}
    return LADRPolicy(adaptive=AdaptiveRescue(pace=pace, anchor_quantile=q), **kw)


def _margins(logits: torch.Tensor) -> torch.Tensor:
    top2 = torch.softmax(logits, dim=-1).topk(2, dim=-1).values
    return top2[..., 0] - top2[..., 1]


def test_subset_quantile_is_numpys_lower_quantile_and_inf_when_empty():
    g = torch.Generator().manual_seed(0)
    vals = torch.rand(4, 20, generator=g, dtype=torch.float64)
    subset = torch.rand(4, 20, generator=g) < 0.5
    subset[3] = False
    for q in (0.0, 0.3, 0.5, 1.0):
        got = subset_quantile(vals, subset, q)
        for b in range(3):
            want = np.quantile(vals[b][subset[b]].numpy(), q, method="lower")
            assert got[b].item() == want
        assert got[3].item() == math.inf


@pytest.mark.parametrize("steps", [12, 20, 64])
def test_pace_cap_is_one_step_and_pace_64ths_of_the_schedule_further(steps: int):
    """pace counts in 64ths of the schedule at any T (at T = 64: pace steps, as tuned)."""
    sched = get_schedule("cosine")
    m_std = torch.zeros(2, 100, dtype=torch.bool)
    m_std[0, :80], m_std[1, :10] = True, True
    t_eff = torch.tensor([0.3, 0.9], dtype=torch.float64)
    cap = pace_cap(m_std, t_eff, steps=steps, pace=3.0, schedule=sched)
    for b, count in enumerate((80, 10)):
        t = min(1.0, t_eff[b].item() + 1 / steps + 3 / 64)
        assert cap[b].item() == max(0, count - math.floor(100 * math.cos(math.pi / 2 * t) + 1e-7))


class StepChecker:
    """Callback: every rescued token is a seen-only frontier candidate with a margin >= the
    anchor quantile of this step's standard picks, and the step never goes past the pace cap."""

    def __init__(self, den: LocalityDenoiser, policy: LADRPolicy, steps: int) -> None:
        self.den, self.policy, self.steps = den, policy, steps
        self.sched = get_schedule("cosine")
        self.before = torch.ones(len(den.table), N, dtype=torch.bool)
        self.rescued_total = 0

    def __call__(self, rec: dict) -> None:
        margin = _margins(self.den.calls[-1][2])
        cfg = self.policy.adaptive
        for b in range(len(self.den.table)):
            before, after = self.before[b], rec["masked"][b]
            rescued, picks = rec["rescued"][b], rec["unmasked"][b] & ~rec["rescued"][b]
            assert torch.equal(rec["unmasked"][b], before & ~after)
            if rescued.any():
                m_std = (after | rescued).unsqueeze(0)
                seen = frontier(before.unsqueeze(0), GRID)[0]
                assert bool((rescued <= (seen & m_std[0])).all())
                anchor = np.quantile(margin[b][picks].numpy(), cfg.anchor_quantile,
                                     method="lower")
                assert bool((margin[b][rescued] >= anchor).all())
                assert bool((margin[b][rescued] > 0).all())
            if rec["step"] < self.steps - 1:
                t = min(1.0, rec["t_eff"][b].item() + 1 / self.steps + cfg.pace / 64)
                floor_count = math.floor(N * math.cos(math.pi / 2 * t) + 1e-6)
                assert int(after.sum()) >= min(floor_count, int(before.sum()))
            self.rescued_total += int(rescued.sum())
        self.before = rec["masked"].clone()


@pytest.mark.parametrize("q", [0.0, 0.5, 1.0])
def test_rescue_respects_anchor_frontier_and_pace(q):
    den = LocalityDenoiser(make_table(3, N, 8, seed=3, scale=1.0), GRID, coupling=2.5)
    policy = _policy(pace=2.0, q=q)
    chk = StepChecker(den, policy, steps=24)
    gens = [torch.Generator().manual_seed(s) for s in range(3)]
    res = sample(den, (3, *GRID), 24, LADR(policy), generator=gens, callback=chk)
    assert chk.rescued_total > 0  # the checks above saw real rescues
    assert res.nfe < 24 and res.tokens.shape == (3, N)


def test_pace_zero_is_ladr_without_rescue():
    den = LocalityDenoiser(make_table(2, N, 8, seed=1), GRID)
    off = LADRPolicy(alpha=(0.0, 0.0, 0.0), selection="gumbel", rescue_token="argmax",
                     seen_only=True)
    runs = [sample(den, (2, *GRID), 16, LADR(p), generator=torch.Generator().manual_seed(7))
            for p in (_policy(pace=0.0), off)]
    assert torch.equal(runs[0].tokens, runs[1].tokens) and runs[0].nfe == runs[1].nfe


class ConstantDenoiser:
    """The same logits for every position: all margins equal (degenerate distribution)."""

    def __init__(self, row: list[float]) -> None:
        self.row = torch.tensor(row)

    def __call__(self, tokens: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
        return self.row.expand(tokens.shape[0], tokens.shape[1], len(self.row)).clone()


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_equal_margins_advance_at_the_capped_pace_and_never_stall(temperature):
    steps, pace = 32, 3.0
    recs: list[dict] = []
    res = sample(ConstantDenoiser([3.0, 1.0, 0.0, 0.0]), (2, *GRID), steps, LADR(_policy(pace=pace, seen_only=False)), temperature=temperature,
                 generator=torch.Generator().manual_seed(0), callback=recs.append)
    assert not res.tokens.eq(-1).any() and recs[-1]["masked"].sum() == 0
    sched = get_schedule("cosine")
    for rec in recs[:-1]:
        after = rec["masked"].sum(dim=1)
        before = after + rec["unmasked"].sum(dim=1)
        m_std = after + rec["rescued"].sum(dim=1)
        cap = pace_cap(torch.arange(N).unsqueeze(0) < m_std.unsqueeze(1),
                       rec["t_eff"].double(), steps, pace, sched)
        cand = frontier(rec["masked"] | rec["rescued"], GRID).sum(dim=1)
        assert bool((after < before).all())  # progress every step, for every item
        # every candidate is valid, so the rescue is the pace cap (or the whole frontier)
        assert torch.equal(rec["rescued"].sum(dim=1), torch.minimum(cap, cand))
    assert res.nfe < steps / 2  # the rescue really ran at the capped pace


def test_no_preference_at_all_rescues_nothing_and_falls_back_to_the_schedule():
    recs: list[dict] = []
    res = sample(ConstantDenoiser([0.0] * 4), (1, *GRID), 12, LADR(_policy(seen_only=False)),
                 generator=torch.Generator().manual_seed(0), callback=recs.append)
    assert not any(r["rescued"].any() for r in recs)
    assert recs[-1]["masked"].sum() == 0 and res.nfe <= 12


def test_ablations_keep_the_budget_and_change_only_which_tokens():
    g = torch.Generator().manual_seed(4)
    before = torch.rand(3, N, generator=g) < 0.7
    m_std = before & (torch.rand(3, N, generator=g) < 0.8)
    top1, margin, uniform = (torch.rand(3, N, generator=g) for _ in range(3))
    t_eff = torch.full((3,), 0.4, dtype=torch.float64)
    counts, sets = set(), []
    for kw in ({}, {"metric": "confidence"}, {"metric": "random"},
               {"candidates": "random"}, {"candidates": "non_neighbors"}):
        r = adaptive_rescue(_policy(seen_only=False, pace=12.0, **kw), m_std, before, top1, margin,
                            uniform, t_eff, 16, get_schedule("cosine"), GRID)
        assert bool((r <= m_std).all())
        counts.add(tuple(r.sum(dim=1).tolist()))
        sets.append(r)
    assert len(counts) == 1 and sum(next(iter(counts))) > 0
    assert any(not torch.equal(sets[0], s) for s in sets[1:])


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"pace": -1.0}, r"pace must be a number in \[0, 1024\]"),
    ({"pace": math.nan}, "pace"),
    ({"pace": True}, "pace"),
    ({"anchor_quantile": 1.5}, r"anchor_quantile must be a number in \[0, 1\]"),
    ({"anchor_quantile": "0.5"}, "anchor_quantile"),
])
def test_bad_adaptive_values_name_field_and_range(kwargs, match):
    with pytest.raises(ValueError, match=match):
        AdaptiveRescue(**kwargs)


def test_adaptive_policy_rejects_unused_paper_fields_and_wrong_types():
    with pytest.raises(ValueError, match="alpha, delayed are not used with adaptive"):
        LADRPolicy(alpha=(0.1, 0.1, 0.1), delayed=True, adaptive=AdaptiveRescue())
    with pytest.raises(ValueError, match="adaptive must be None or"):
        LADRPolicy(adaptive={"pace": 3})


def test_preset_and_repr():
    preset = PRESETS["adaptive"].policy
    assert isinstance(preset.adaptive, AdaptiveRescue)
    assert "adaptive" not in repr(LADRPolicy()) and "AdaptiveRescue(" in repr(preset)
    assert PRESETS["paper"].policy == LADRPolicy() and LADRPolicy().adaptive is None
