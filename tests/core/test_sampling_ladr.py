"""LADR (paper Algorithm 1) checked step by step through the callback, independently of the
implementation: frontier by the paper's Definition (brute force), counts in float64 Python."""

from __future__ import annotations

import math

import pytest
import torch

from ladr_core import LADR, LADRPolicy, sample
from ladr_core.schedules import Schedule, get_schedule
from tests.kit.fakes import LocalityDenoiser, make_table


def brute_frontier(m_std: list[bool], grid: tuple[int, int], k: int) -> set[int]:
    """Definition (Generation Frontier): masked i with a decoded j in its k x k window."""
    h, w = grid
    r = k // 2
    out = set()
    for i, m in enumerate(m_std):
        if not m:
            continue
        y, x = divmod(i, w)
        for dy in range(-r, r + 1):
            for dx in range(-r, r + 1):
                yy, xx = y + dy, x + dx
                if 0 <= yy < h and 0 <= xx < w and not m_std[yy * w + xx]:
                    out.add(i)
    return out


class AlgorithmOneChecker:
    """Callback asserting Algorithm 1's invariants for item `b` of every step."""

    def __init__(self, den: LocalityDenoiser, policy: LADRPolicy, steps: int, schedule: str,
                 grid: tuple[int, int], temperature: float = 0.0) -> None:
        self.den, self.policy, self.steps, self.grid = den, policy, steps, grid
        self.temperature = temperature
        self.sched = get_schedule(schedule)
        self.n = grid[0] * grid[1]
        self.prev_tokens: torch.Tensor | None = None
        self.prev_masked = torch.ones(len(den.table), self.n, dtype=torch.bool)
        self.records: list[dict] = []
        self.rescued_total = 0

    def __call__(self, rec: dict) -> None:
        step, logits = rec["step"], self.den.calls[-1][2]
        assert rec["nfe"] == len(self.den.calls) == step + 1
        for b in range(len(self.den.table)):
            self.check_item(rec, b, logits[b])
        self.prev_tokens = rec["tokens"].clone()
        self.prev_masked = rec["masked"].clone()
        self.records.append({k: v for k, v in rec.items()})

    def check_item(self, rec: dict, b: int, logits: torch.Tensor) -> None:
        pol, n, step = self.policy, self.n, rec["step"]
        prev = self.prev_masked[b].tolist()
        masked, rescued, unmasked = (rec[k][b].tolist() for k in ("masked", "rescued", "unmasked"))
        # decoded tokens never change; unmasked = previously masked and now not
        if self.prev_tokens is not None:
            decoded = ~self.prev_masked[b]
            assert torch.equal(rec["tokens"][b][decoded], self.prev_tokens[b][decoded])
        assert unmasked == [p and not m for p, m in zip(prev, masked, strict=True)]
        assert all(p or not r for p, r in zip(prev, rescued, strict=True))
        # Step 1: inverse scheduling (Prop. 2), counts in float64
        remaining = sum(prev)
        t_eff = self.sched.gamma_inv(remaining / n)
        assert rec["t_eff"][b].item() == pytest.approx(t_eff, abs=1e-5)
        lo, hi = pol.phase_bounds
        phase = 0 if t_eff < lo else (1 if t_eff < hi else 2)
        assert rec["phase"][b].item() == phase
        t_next = min(t_eff + 1 / self.steps, 1.0)
        n_mask = 0 if step == self.steps - 1 else math.floor(n * self.sched.gamma(t_next) + 1e-9)
        # Step 3: standard selection keeps exactly n_mask masked, the least confident ones
        m_std = [m or r for m, r in zip(masked, rescued, strict=True)]
        assert sum(m_std) == n_mask
        p = torch.softmax(logits.double(), dim=-1)
        top2 = p.topk(2, dim=-1).values
        top1, margin = top2[:, 0].tolist(), (top2[:, 0] - top2[:, 1]).tolist()
        std_unmasked = [u and not r for u, r in zip(unmasked, rescued, strict=True)]
        # "gumbel" selection ranks by noisy log p(sampled): top-1 order holds only without noise
        ranked_by_top1 = pol.selection == "top1" or self.temperature == 0
        if ranked_by_top1 and any(std_unmasked) and any(m_std):
            assert min(top1[i] for i in range(n) if std_unmasked[i]) >= max(
                top1[i] for i in range(n) if m_std[i]) - 1e-6
        # Step 4: rescue subset of the frontier of M_std, margin > tau, budget of Eq. 10
        front = brute_frontier(m_std, self.grid, pol.kernel_size)
        if pol.seen_only:  # neighbours of tokens decoded before the step, away from its picks
            seen = brute_frontier(prev, self.grid, pol.kernel_size)
            near_picks = brute_frontier([not u for u in std_unmasked], self.grid, pol.kernel_size)
            front = {i for i in seen if m_std[i]} - near_picks
        res = {i for i in range(n) if rescued[i]}
        if pol.rescue_token == "argmax":
            top = p.argmax(dim=-1)
            assert all(rec["tokens"][b][i] == top[i] for i in res)
        tau = pol.tau[phase]
        valid = {i for i in front if tau is None or margin[i] > tau + 1e-6}
        alpha = 0.0 if (phase == 0 and pol.delayed) else pol.alpha[phase]
        k_res = min(math.floor(len(front) * alpha + 1e-9), len(valid))
        assert len(res) == k_res
        if pol.candidates == "neighbors":
            assert res <= front
            if pol.metric in ("margin", "confidence"):
                assert res <= valid
                key = margin if pol.metric == "margin" else top1
                if res and valid - res:
                    assert min(key[i] for i in res) >= max(key[i] for i in valid - res) - 1e-6
        elif pol.candidates == "non_neighbors":
            off = {i for i in range(n) if m_std[i]} - front
            assert res <= off or off <= res  # off-frontier first, neighbours only once exhausted
        self.rescued_total += len(res)


POLICIES = [
    LADRPolicy(),
    LADRPolicy(delayed=True),
    LADRPolicy(kernel_size=5, tau=(0.2, 0.1, 0.0), alpha=(0.5, 0.5, 0.7)),
    LADRPolicy(metric="confidence"),
    LADRPolicy(metric="random"),
    LADRPolicy(candidates="non_neighbors"),
    LADRPolicy(candidates="random"),
    LADRPolicy(selection="gumbel"),
    LADRPolicy(rescue_token="argmax"),
    LADRPolicy(seen_only=True),
    LADRPolicy(tau=(0.3, 0.3, 0.3), alpha=(1.0, 1.0, 1.0), selection="gumbel",
               rescue_token="argmax", seen_only=True),
]


def _policy_id(p: LADRPolicy) -> str:
    return f"{p.metric}-{p.candidates}-{p.delayed}-{p.selection}-{p.rescue_token}-{p.seen_only}"


@pytest.mark.parametrize("policy", POLICIES, ids=_policy_id)
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_algorithm_one_invariants(policy: LADRPolicy, temperature: float) -> None:
    grid, steps = (8, 8), 16
    den = LocalityDenoiser(make_table(2, 64, 12, seed=3), grid)
    check = AlgorithmOneChecker(den, policy, steps, "cosine", grid, temperature)
    gens = [torch.Generator().manual_seed(i) for i in range(2)]
    res = sample(den, (2, *grid), steps, strategy=LADR(policy),
                 temperature=temperature, generator=gens, callback=check)
    assert res.steps == len(check.records) == res.nfe
    assert not check.records[-1]["masked"].any()
    assert ((res.tokens >= 0) & (res.tokens < 12)).all()
    if policy.alpha != (0.0, 0.0, 0.0):
        assert check.rescued_total > 0  # the rescue path was exercised


def test_linear_schedule_invariants() -> None:
    grid, steps = (6, 6), 12
    den = LocalityDenoiser(make_table(1, 36, 8, seed=9), grid)
    check = AlgorithmOneChecker(den, LADRPolicy(), steps, "linear", grid)
    sample(den, (1, *grid), steps, strategy="ladr", temperature=0.0, schedule="linear",
           callback=check)
    assert check.rescued_total > 0


def test_ladr_exits_early_and_uses_every_phase() -> None:
    grid, steps = (16, 16), 32
    den = LocalityDenoiser(make_table(1, 256, 16, seed=1), grid, coupling=3.0)
    phases: set[int] = set()
    res = sample(den, (1, *grid), steps, strategy="ladr", temperature=0.0,
                 callback=lambda r: phases.update(r["phase"].tolist()))
    assert res.steps < steps and res.nfe == res.steps
    assert phases == {0, 1, 2}
    base = sample(den, (1, *grid), steps, strategy="baseline", temperature=0.0)
    assert base.steps == steps


def test_delayed_never_rescues_in_exploration() -> None:
    grid, steps = (8, 8), 16
    den = LocalityDenoiser(make_table(1, 64, 8, seed=2), grid, coupling=3.0)
    seen = []
    sample(den, (1, *grid), steps, strategy=LADR(LADRPolicy(delayed=True)),
           temperature=0.0, callback=lambda r: seen.append((int(r["phase"]), int(r["rescued"].sum()))))
    assert any(ph == 0 for ph, _ in seen)
    assert all(k == 0 for ph, k in seen if ph == 0)
    assert any(k > 0 for ph, k in seen if ph > 0)


@pytest.mark.parametrize("schedule", ["cosine", "linear"])
def test_ladr_always_terminates_within_steps(schedule: str) -> None:
    """For many N, T and policies every run ends with nothing masked after <= T steps."""
    for (h, w) in [(1, 1), (1, 5), (4, 7), (9, 9)]:
        n = h * w
        for steps in [1, 2, 3, 7, 64]:
            for pol in (LADRPolicy(), LADRPolicy(alpha=(0.0, 0.0, 0.0))):
                den = LocalityDenoiser(make_table(1, n, 5, seed=n + steps), (h, w))
                last: list[torch.Tensor] = []
                res = sample(den, (1, h, w), steps, strategy=LADR(pol),
                             temperature=0.0, schedule=schedule,
                             callback=lambda r, last=last: last.append(r["masked"]))
                assert res.steps == len(last) <= steps
                assert not last[-1].any()


def test_last_step_unmasks_everything_even_if_schedule_never_reaches_zero() -> None:
    """gamma bottoming out at 0.5 would keep half the tokens masked; step T-1 still ends it."""
    stuck = Schedule("stuck", lambda t: 1.0 - 0.5 * t, lambda r: 2.0 * (1.0 - r))
    masked_after: list[int] = []
    den = LocalityDenoiser(make_table(1, 36, 6, seed=0), (6, 6))
    res = sample(den, (1, 6, 6), 5, strategy=LADR(LADRPolicy(alpha=(0.0, 0.0, 0.0))),
                 temperature=0.0, schedule=stuck,
                 callback=lambda r: masked_after.append(int(r["masked"].sum())))
    assert res.steps == 5
    assert masked_after[-2] >= 18 and masked_after[-1] == 0


def _off_mode_rescues(policy: LADRPolicy, temperature: float) -> tuple[int, int]:
    """(rescued tokens that are not their step's top-1 token, rescued tokens) over one run."""
    grid = (8, 8)
    den = LocalityDenoiser(make_table(2, 64, 12, seed=3), grid)
    counts = [0, 0]

    def record(rec: dict) -> None:
        top = den.calls[-1][2].argmax(dim=-1)
        counts[0] += int((rec["rescued"] & (rec["tokens"] != top)).sum())
        counts[1] += int(rec["rescued"].sum())

    sample(den, (2, *grid), 16, strategy=LADR(policy), temperature=temperature,
           generator=[torch.Generator().manual_seed(i) for i in range(2)], callback=record)
    return counts[0], counts[1]


def test_rescue_token_argmax_commits_the_top1_token_where_the_paper_commits_the_sample() -> None:
    off, total = _off_mode_rescues(LADRPolicy(), 1.5)
    assert total > 0 and off > 0  # Algorithm 1 commits z_pred, a sample: sometimes off-mode
    off, total = _off_mode_rescues(LADRPolicy(rescue_token="argmax"), 1.5)
    assert total > 0 and off == 0


def test_gumbel_selection_equals_top1_without_noise_and_differs_with_it() -> None:
    grid, steps = (8, 8), 16
    den = LocalityDenoiser(make_table(2, 64, 12, seed=3), grid)

    def run(selection: str, temperature: float) -> torch.Tensor:
        gens = [torch.Generator().manual_seed(i) for i in range(2)]
        return sample(den, (2, *grid), steps, strategy=LADR(LADRPolicy(selection=selection)), temperature=temperature, generator=gens).tokens

    # log p(argmax) ranks exactly like p(argmax): same run at temperature 0
    assert torch.equal(run("gumbel", 0.0), run("top1", 0.0))
    assert not torch.equal(run("gumbel", 1.0), run("top1", 1.0))
