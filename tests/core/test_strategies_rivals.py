"""The training-free rival strategies (threshold, entropy bound, Halton order, their LADR
combinations and LADR without locality): each one's rule, and the loop's contract for every
registered strategy beyond baseline / LADR / Prophet (taken from the registry: a new strategy
joins these checks by registering).

Contract: item i of a batch equals its own single run token for token (float32), also in a
rolling batch; known tokens (painting) never change; bad parameters are refused at
construction with one message naming the parameter and its range. The host-sync and host-data
checks of every registered strategy live in tests/core/test_sampling_sync.py.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from ladr_core import (
    PRESETS,
    EntropyBound,
    Halton,
    HaltonLADR,
    KnownTokens,
    LADRGlobal,
    Threshold,
    ThresholdFrontier,
    resolve_strategy,
    sample,
    strategy_names,
)
from ladr_core.step import Strategy
from ladr_core.strategies.halton import halton_order
from tests.kit.fakes import LocalityDenoiser, make_table

GRID, K = (6, 6), 10
N = GRID[0] * GRID[1]
OTHERS = [n for n in strategy_names() if n not in ("baseline", "ladr", "prophet")]


def _cases() -> dict[str, Strategy]:
    """Every other registered strategy at T = 12: its defaults, and where it has a threshold a
    looser one (so steps commit many tokens and the rules' batching is exercised)."""
    out: dict[str, Strategy] = {}
    for name in OTHERS:
        default = resolve_strategy(name)
        out[name] = default
        if hasattr(default, "tau"):
            out[name + "-loose"] = replace(default, tau=0.3)
        elif hasattr(default, "gamma"):
            out[name + "-loose"] = replace(default, gamma=3.0, token="sample")
        elif hasattr(default, "policy"):
            out[name + "-loose"] = replace(default, policy=replace(default.policy,
                                                                   tau=(0.3, 0.3, 0.3)))
    return out


CASES = _cases()


def _gens(seeds) -> list[torch.Generator]:
    return [torch.Generator().manual_seed(s) for s in seeds]


class ItemDenoiser(LocalityDenoiser):
    """Sent only the items still running (`items=`), as DiMOO's denoiser in a rolling batch."""

    def __call__(self, tokens: torch.Tensor, masked: torch.Tensor,
                 items: list[int] | None = None) -> torch.Tensor:
        items = list(range(self.table.shape[0])) if items is None else list(items)
        return LocalityDenoiser(self.table[items], self.grid, self.coupling)(tokens, masked)


def _known(batch: int, seed: int) -> KnownTokens:
    g = torch.Generator().manual_seed(seed)
    generate = torch.zeros(batch, *GRID, dtype=torch.bool)
    generate[0, 1:4, 2:5] = True  # inpaint a box
    generate[1:, :, :3] = True  # outpaint a side
    return KnownTokens(torch.randint(0, K, (batch, N), generator=g), generate.view(batch, N))


def test_the_registry_holds_the_rivals() -> None:
    assert {"threshold", "entropy", "halton", "threshold-frontier", "halton-ladr",
            "ladr-global"} <= set(OTHERS)


# ---------------------------------------------------------------- the loop's contract
@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_batch_item_equals_its_single_run(name: str, temperature: float) -> None:
    den = LocalityDenoiser(make_table(3, N, K, seed=7), GRID)
    batch = sample(den, (3, *GRID), 12, CASES[name], temperature=temperature,
                   generator=_gens([10, 11, 12]))
    for i in range(3):
        single = sample(den.item(i), (1, *GRID), 12, CASES[name], temperature=temperature,
                        generator=_gens([10 + i])[0])
        assert torch.equal(batch.tokens[i:i + 1], single.tokens), f"item {i}"
        assert batch.item_nfe[i] == single.nfe
    assert batch.steps <= 12


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("max_batch", [2, 3])
def test_a_rolling_batch_equals_the_single_runs(name: str, max_batch: int) -> None:
    b = 5
    table = make_table(b, N, K, seed=11, scale=1.5)
    gens = _gens(range(100, 100 + b))
    res = sample(ItemDenoiser(table, GRID), (b, *GRID), 12, CASES[name], generator=gens,
                 max_batch=max_batch)
    for i in range(b):
        g = torch.Generator().manual_seed(100 + i)
        one = sample(LocalityDenoiser(table[i:i + 1], GRID), (1, *GRID), 12, CASES[name],
                     generator=g)
        assert torch.equal(res.tokens[i], one.tokens[0]), f"item {i}"
        assert torch.equal(gens[i].get_state(), g.get_state()), f"item {i}'s draws"
        assert res.item_nfe[i] == one.nfe


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("max_batch", [None, 2])
def test_known_tokens_never_change(name: str, max_batch: int | None) -> None:
    known = _known(3, seed=3)
    table = make_table(3, N, K, seed=4)
    records: list[dict] = []
    res = sample(ItemDenoiser(table, GRID), (3, *GRID), 12, CASES[name], generator=_gens(
        range(3)), known=known, max_batch=max_batch, callback=records.append)
    keep = ~known.generate
    assert torch.equal(res.tokens[keep], known.tokens[keep])
    for r in records:
        slots = [i for i in r["items"] if i >= 0]
        assert not (r["unmasked"][: len(slots)] & keep[slots]).any()
    for i in range(3):  # and each item equals its own single painting run
        one = sample(LocalityDenoiser(table[i:i + 1], GRID), (1, *GRID), 12, CASES[name],
                     generator=_gens([i])[0],
                     known=KnownTokens(known.tokens[i:i + 1], known.generate[i:i + 1]))
        assert torch.equal(res.tokens[i], one.tokens[0]), f"item {i}"


# ---------------------------------------------------------------- bad parameters
@pytest.mark.parametrize(("make", "message"), [
    *[(lambda v=v, c=c: c(tau=v), r"tau must be a finite number in \(0, 1\]; got ")
      for c in (Threshold, ThresholdFrontier) for v in (0, 0.0, -0.1, 1.01, math.nan, math.inf,
                                                         "0.9", True, None)],
    *[(lambda v=v: EntropyBound(gamma=v), r"gamma must be a finite number in \[0, inf\); got ")
      for v in (-0.5, -1, math.nan, math.inf, "1", True, None)],
    *[(lambda v=v, c=c: c(token=v), r"token must be one of \('sample', 'argmax'\); got ")
      for c in (Threshold, ThresholdFrontier, EntropyBound) for v in ("max", None, 1)],
    (lambda: HaltonLADR(policy="nano"), r"policy must be a LADRPolicy"),
    (lambda: resolve_strategy("maskgit"), r"a strategy name \[.*'halton'.*\].*got 'maskgit'"),
    *[(lambda g=g: halton_order(g), r"halton: grid must be \(H, W\), two ints >= 1")
      for g in ((0, 4), (4, -1), (2.0, 3), (4,), "12x12", (True, 3))],
])
def test_every_bad_parameter_is_refused_with_its_message(make, message: str) -> None:
    with pytest.raises(ValueError, match=message) as err:
        make()
    assert str(err.value).count("\n") == 0


def test_the_message_names_the_strategy_and_the_parameter() -> None:
    with pytest.raises(ValueError, match=r"^Threshold\(tau=\.\.\.\): tau must be .*; got 1\.5"):
        Threshold(tau=1.5)
    with pytest.raises(ValueError, match=r"^EntropyBound\(gamma=\.\.\.\): gamma .*; got -1"):
        EntropyBound(gamma=-1)
    assert Threshold(tau=1).tau == 1.0 and EntropyBound(gamma=0).gamma == 0.0  # edges valid


# ---------------------------------------------------------------- the rules themselves
def _probs(logits: torch.Tensor) -> torch.Tensor:
    return torch.softmax(logits, dim=-1)


@pytest.mark.parametrize("tau", [0.2, 0.35, 0.6, 1.0])
@pytest.mark.parametrize("cls", [Threshold, ThresholdFrontier])
def test_threshold_commits_exactly_the_tokens_at_or_above_tau(tau: float, cls) -> None:
    den = LocalityDenoiser(make_table(2, N, K, seed=5, scale=1.2), GRID, coupling=1.0)
    records: list[dict] = []
    res = sample(den, (2, *GRID), 24, cls(tau=tau, token="argmax"), temperature=0.0,
                 generator=_gens([0, 1]),
                 callback=records.append)
    committed_many = False
    for (_, masked, logits), r in zip(den.calls, records, strict=True):
        p = _probs(logits)
        top1, argmax = p.max(dim=-1)
        pool = masked
        if cls is ThresholdFrontier:
            from ladr_core.strategies.rescue import frontier
            pool = frontier(masked, GRID)
        for b in range(2):
            if not masked[b].any():
                continue
            want = pool[b] & (top1[b] >= tau)
            if r["step"] == 23:
                want = masked[b].clone()
            elif not want.any():  # none clears tau: the single most confident of the pool
                src = pool[b] if pool[b].any() else masked[b]
                want = torch.zeros_like(want)
                want[torch.where(src, top1[b], -1.0).argmax()] = True
            assert torch.equal(r["unmasked"][b], want), (r["step"], b)
            assert torch.equal(r["tokens"][b][want], argmax[b][want])  # token="argmax"
            committed_many |= int(want.sum()) > 1
    assert res.tokens.shape == (2, N)
    if tau < 0.5:
        assert committed_many  # the check above saw multi-token steps


@pytest.mark.parametrize("gamma", [0.0, 0.5, 2.0, 6.0])
def test_entropy_commits_the_longest_low_entropy_prefix_within_gamma(gamma: float) -> None:
    den = LocalityDenoiser(make_table(2, N, K, seed=6, scale=1.5), GRID)
    records: list[dict] = []
    sample(den, (2, *GRID), 32, EntropyBound(gamma=gamma), temperature=0.0,
           generator=_gens([0, 1]), callback=records.append)
    for (_, masked, logits), r in zip(den.calls, records, strict=True):
        p = _probs(logits).double()
        h = -(p * p.clamp_min(1e-300).log()).sum(-1)
        for b in range(2):
            if not masked[b].any() or r["step"] == 31:
                continue
            got = r["unmasked"][b]
            assert got.any() and not (got & ~masked[b]).any()
            inside = h[b][got]
            outside = h[b][masked[b] & ~got]
            if got.sum() > 1:  # the bound: the committed tokens' summed entropy <= gamma
                assert inside.sum() <= gamma + 1e-5
            if outside.numel():  # the lowest entropies, and the next one would break the bound
                assert inside.max() <= outside.min() + 1e-6
                assert inside.sum() + outside.min() > gamma - 1e-5


def test_the_entropy_statistic_is_minus_sum_p_log_p_of_the_masked_rows() -> None:
    from ladr_core.stats import item_stats
    from ladr_core.step import Needs

    x = torch.randn(7, K) * 3
    x[0] = -math.inf  # a row with one possible code: entropy 0, no 0 * log 0
    x[0, 3] = 1.0
    stats = item_stats(x.clone(), Needs(frozenset({"entropy", "top1"})), None,
                       torch.empty(7, K))
    p = torch.softmax(x.double(), -1)
    want = -(p * torch.where(p > 0, p.log(), torch.zeros_like(p))).sum(-1)
    assert torch.allclose(stats.entropy.double(), want, atol=1e-5)
    assert stats.entropy[0] == 0.0
    assert torch.equal(stats.top1, torch.softmax(x, -1).max(-1).values)


def test_halton_commits_the_baseline_count_in_halton_order() -> None:
    from ladr_core.schedules import get_schedule
    from ladr_core.strategies.baseline import baseline_keep

    den = LocalityDenoiser(make_table(1, N, K, seed=2), GRID)
    records: list[dict] = []
    sample(den, (1, *GRID), 8, Halton(), generator=_gens([3])[0], callback=records.append)
    order = halton_order(GRID).tolist()
    done = 0
    for r in records:
        left = int(baseline_keep(N, torch.tensor([r["step"]]), 8, get_schedule()).item())
        now = N - left if r["step"] < 7 else N
        assert sorted(torch.nonzero(r["unmasked"][0]).flatten().tolist()) == sorted(
            order[done:now])
        done = now


def test_halton_skips_known_positions() -> None:
    known = _known(1, seed=9)
    records: list[dict] = []
    sample(LocalityDenoiser(make_table(1, N, K, seed=1), GRID), (1, *GRID), 6, Halton(),
           known=known, generator=_gens([0])[0], callback=records.append)
    hole = set(torch.nonzero(known.generate[0]).flatten().tolist())
    seen = [p for p in halton_order(GRID).tolist() if p in hole]
    got = [sorted(torch.nonzero(r["unmasked"][0]).flatten().tolist()) for r in records]
    flat = 0
    for part in got:  # each step's commits are the next run of the order restricted to the hole
        assert part == sorted(seen[flat:flat + len(part)])
        flat += len(part)
    assert flat == len(hole)


# ---------------------------------------------------------------- the Halton order
@pytest.mark.parametrize("grid", [(1, 1), (1, 9), (7, 1), (6, 6), (12, 12), (5, 37), (64, 64),
                                  (48, 80), (33, 17)])
def test_the_halton_order_is_a_permutation(grid: tuple[int, int]) -> None:
    order = halton_order(grid)
    assert order.dtype == torch.long and order.shape == (grid[0] * grid[1],)
    assert torch.equal(order.sort().values, torch.arange(grid[0] * grid[1]))


def test_the_first_points_are_halton_mask_gits() -> None:
    """Point i (from 1) = (row floor(H phi_2(i)), col floor(W phi_3(i))): on 4 x 4 the points
    (1/2, 1/3), (1/4, 2/3), (3/4, 1/9), (1/8, 4/9) give cells 9, 6, 12, 1."""
    assert halton_order((4, 4))[:4].tolist() == [9, 6, 12, 1]


@pytest.mark.parametrize(("a", "b"), [(3, 2), (2, 3), (4, 2)])
def test_every_prefix_of_length_2i_3j_fills_each_block_once(a: int, b: int) -> None:
    """The low-discrepancy property claimed in ladr_core/strategies/halton.py: on a 2^a x 3^b grid the
    first 2^i 3^j positions put exactly one position into each block of (2^a / 2^i) rows x
    (3^b / 3^j) columns."""
    h, w = 2**a, 3**b
    order = halton_order((h, w))
    rows, cols = order // w, order % w
    for i in range(a + 1):
        for j in range(b + 1):
            n = 2**i * 3**j
            block = (rows[:n] // (h // 2**i)) * 3**j + cols[:n] // (w // 3**j)
            assert torch.equal(block.sort().values, torch.arange(n)), (i, j)


def _star_discrepancy(order: torch.Tensor, grid: tuple[int, int], n: int) -> float:
    """max over anchored boxes [0, r) x [0, c) of |count / n - r c / (H W)| for the first n."""
    h, w = grid
    hit = torch.zeros(h * w)
    hit[order[:n]] = 1.0
    counts = hit.view(h, w).cumsum(0).cumsum(1)
    r = torch.arange(1, h + 1).view(h, 1).double()
    c = torch.arange(1, w + 1).view(1, w).double()
    return float((counts.double() / n - r * c / (h * w)).abs().max())


@pytest.mark.parametrize("grid", [(12, 12), (32, 32), (24, 40), (64, 64)])
def test_halton_prefixes_spread_better_than_random_and_raster_orders(grid) -> None:
    """Star discrepancy of the first n positions: below the median of 20 random orders and a
    third of raster order's at every prefix tested; from 36 positions on, at or below the best
    of the 20 random orders."""
    n_all = grid[0] * grid[1]
    halton = halton_order(grid)
    g = torch.Generator().manual_seed(0)
    randoms = [torch.randperm(n_all, generator=g) for _ in range(20)]
    for frac in (0.05, 0.1, 0.25, 0.5, 0.75):
        n = int(n_all * frac)
        d = _star_discrepancy(halton, grid, n)
        rand = sorted(_star_discrepancy(p, grid, n) for p in randoms)
        assert d < rand[10], (frac, d, rand[10])
        assert n < 36 or d <= rand[0] + 1e-12, (frac, d, rand[0])
        assert d < _star_discrepancy(torch.arange(n_all), grid, n) / 3  # raster order


# ---------------------------------------------------------------- the LADR combinations
def test_ladr_global_rescues_off_the_frontier_and_ladr_does_not() -> None:
    """Same policy and logits: LADR's rescue stays on the frontier, LADRGlobal's does not."""
    from ladr_core import LADR
    from ladr_core.strategies.rescue import dilate

    policy = replace(PRESETS["nano"].policy, tau=(0.2, 0.2, 0.2), seen_only=False)
    off_frontier = {}
    for cls in (LADR, LADRGlobal):
        den = LocalityDenoiser(make_table(2, N, K, seed=8, scale=3.0), GRID, coupling=0.5)
        records: list[dict] = []
        sample(den, (2, *GRID), 16, cls(policy), temperature=0.0, callback=records.append)
        far = 0
        for r in records:
            std = r["unmasked"] & ~r["rescued"]
            decoded_after_std = ~(r["masked"] | r["rescued"])  # = ~M_std
            near = dilate(decoded_after_std, GRID)
            far += int((r["rescued"] & ~near).sum())
            assert not (r["rescued"] & std).any()
        off_frontier[cls.__name__] = far
    assert off_frontier["LADR"] == 0 and off_frontier["LADRGlobal"] > 0


def test_halton_ladr_standard_selection_follows_the_order() -> None:
    """Without rescue (tau above every margin) HaltonLADR commits positions in Halton order."""
    policy = replace(PRESETS["nano"].policy, tau=(0.9999,) * 3)
    den = LocalityDenoiser(make_table(1, N, K, seed=3, scale=0.1), GRID, coupling=0.0)
    records: list[dict] = []
    sample(den, (1, *GRID), 10, HaltonLADR(policy), temperature=0.0, callback=records.append)
    order = halton_order(GRID).tolist()
    done = 0
    for r in records:
        assert not r["rescued"].any()
        got = sorted(torch.nonzero(r["unmasked"][0]).flatten().tolist())
        assert got == sorted(order[done:done + len(got)])
        done += len(got)
    assert done == N


@pytest.mark.parametrize("want", [(), ("logit_gap",), ("log_conf",), ("top1", "argmax"),
                                  ("margin",), ("entropy",), ("log_conf", "logit_gap")])
def test_item_stats_runs_the_softmax_only_for_statistics_that_read_it(want: tuple) -> None:
    """Halton (nothing but the sample) and logit_gap alone need no [L, K] softmax; every
    asked-for statistic is what the full set gives."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from ladr_core.stats import PROB_STATS, item_stats
    from ladr_core.step import STAT_NAMES, Needs

    class Ops(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.names: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            self.names.append(str(func.overloadpacket))
            return func(*args, **(kwargs or {}))

    x = torch.randn(6, K, generator=torch.Generator().manual_seed(3)) * 2
    sampled = torch.randint(0, K, (6,), generator=torch.Generator().manual_seed(4))
    full = item_stats(x.clone(), Needs(frozenset(STAT_NAMES)), sampled, torch.empty(6, K))
    with Ops() as ops:
        got = item_stats(x.clone(), Needs(frozenset(want)), sampled, torch.empty(6, K))
    assert any("softmax" in n for n in ops.names) == bool(set(want) & PROB_STATS), ops.names
    assert torch.equal(got.sampled, sampled)
    for name in want:
        assert torch.equal(getattr(got, name), getattr(full, name)), name
