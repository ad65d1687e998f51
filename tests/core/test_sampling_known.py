"""sample(..., known=KnownTokens(...)): inpainting / outpainting in the one loop.

Known tokens are never changed by any strategy, the baseline equals the official painting-mode
loop (tests/support/official.py with a starting state), every schedule runs over the count to
generate, a full mask is text-to-image and an empty one makes no call.
"""

from __future__ import annotations

import pytest
import torch
from support.official import reference_generate

from ladr_core import LADR, Baseline, KnownTokens, Prophet, sample
from ladr_core.strategies.rescue import frontier
from tests.kit.fakes import LocalityDenoiser, make_table

GRID = (6, 6)
N = 36
K = 12


def _known(batch: int, seed: int, holes: list[tuple[slice, slice]]) -> KnownTokens:
    """Random known codes [B, N]; item i generates the rectangle holes[i] of the grid."""
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, K, (batch, N), generator=g)
    generate = torch.zeros(batch, *GRID, dtype=torch.bool)
    for i, (rows, cols) in enumerate(holes):
        generate[i, rows, cols] = True
    return KnownTokens(tokens, generate.view(batch, N))


HOLES = [(slice(1, 4), slice(2, 5)), (slice(0, 6), slice(0, 2))]  # inpaint; outpaint a side
STRATEGIES = {
    "baseline": Baseline(),
    "ladr-paper": LADR(),
    "ladr-nano": LADR.preset("nano"),
    "ladr-adaptive": LADR.preset("adaptive"),
    "prophet": Prophet(),
}


@pytest.mark.parametrize("name", list(STRATEGIES))
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_known_tokens_never_change_and_the_rest_is_generated(name: str, temperature: float
                                                             ) -> None:
    known = _known(2, seed=3, holes=HOLES)
    den = LocalityDenoiser(make_table(2, N, K, seed=4), GRID)
    records: list[dict] = []
    gens = [torch.Generator().manual_seed(i) for i in range(2)]
    res = sample(den, (2, *GRID), 16, strategy=STRATEGIES[name],
                 temperature=temperature,
                 generator=gens, callback=records.append, known=known)
    keep = ~known.generate
    assert torch.equal(res.tokens[keep], known.tokens[keep])
    assert 1 <= res.steps <= 16 and records[-1]["masked"].sum() == 0
    for tokens, masked, _ in den.calls:  # the denoiser always saw the known codes unmasked
        assert torch.equal(tokens[keep], known.tokens[keep]) and not masked[keep].any()
        assert not (masked & ~known.generate).any()
    for r in records:
        assert not (r["unmasked"] & keep).any() and not (r["rescued"] & keep).any()
        assert torch.equal(r["tokens"][keep], known.tokens[keep])
        assert r["total"].tolist() == known.generate.sum(dim=1).tolist()
    assert records[0]["t_eff"].tolist() == [0.0, 0.0]  # the schedule runs over the hole


@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("hole", HOLES)
def test_baseline_with_known_tokens_equals_the_official_painting_loop(
        temperature: float, hole: tuple[slice, slice]) -> None:
    known = _known(1, seed=5, holes=[hole])
    table = make_table(1, N, K, seed=6)
    g_ref = torch.Generator().manual_seed(7)
    ref, ref_nfe = reference_generate(LocalityDenoiser(table, GRID), N, 10, temperature, g_ref,
                                      known=(known.tokens, known.generate))
    g = torch.Generator().manual_seed(7)
    res = sample(LocalityDenoiser(table, GRID), (1, *GRID), 10, strategy="baseline",
                 temperature=temperature, generator=g, known=known)
    assert torch.equal(res.tokens, ref) and res.nfe == ref_nfe
    assert torch.equal(g.get_state(), g_ref.get_state())  # the same draws, in the same order


def test_baseline_keeps_the_official_count_of_the_hole_masked() -> None:
    """Masked count after step s: floor(vq_len cos(pi/2 (s+1)/T)) >= 1 with vq_len = the hole."""
    import math

    known = _known(1, seed=1, holes=[HOLES[0]])
    counts: list[int] = []
    sample(LocalityDenoiser(make_table(1, N, K, seed=2), GRID), (1, *GRID), 6,
           strategy="baseline", temperature=0.0, known=known,
           callback=lambda r: counts.append(int(r["masked"].sum())))
    expected = [max(1, math.floor(9 * math.cos(math.pi / 2 * (s + 1) / 6))) for s in range(5)]
    assert counts == expected + [0]


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_batch_item_equals_its_single_run(name: str) -> None:
    known = _known(2, seed=8, holes=HOLES)
    den = LocalityDenoiser(make_table(2, N, K, seed=9), GRID)
    batch = sample(den, (2, *GRID), 12, strategy=STRATEGIES[name],
                   generator=[torch.Generator().manual_seed(i) for i in range(2)], known=known)
    for i in range(2):
        one = KnownTokens(known.tokens[i:i + 1], known.generate[i:i + 1])
        single = sample(den.item(i), (1, *GRID), 12, strategy=STRATEGIES[name],
                        generator=torch.Generator().manual_seed(i), known=one)
        assert torch.equal(single.tokens[0], batch.tokens[i])


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_full_mask_is_text_to_image(name: str) -> None:
    table = make_table(2, N, K, seed=10)
    full = KnownTokens(torch.randint(0, K, (2, N)), torch.ones(2, N, dtype=torch.bool))
    runs = []
    for known in (None, full):
        gens = [torch.Generator().manual_seed(i) for i in range(2)]
        runs.append(sample(LocalityDenoiser(table, GRID), (2, *GRID), 12,
                           strategy=STRATEGIES[name], generator=gens,
                           known=known))
    assert torch.equal(runs[0].tokens, runs[1].tokens) and runs[0].nfe == runs[1].nfe


def test_nothing_to_generate_makes_no_call() -> None:
    known = KnownTokens(torch.randint(0, K, (2, N)), torch.zeros(2, N, dtype=torch.bool))
    den = LocalityDenoiser(make_table(2, N, K), GRID)
    res = sample(den, (2, *GRID), 8, strategy="ladr", known=known)
    assert res.nfe == res.steps == 0 and not den.calls
    assert torch.equal(res.tokens, known.tokens)


def test_an_item_with_nothing_to_generate_rides_along_unchanged() -> None:
    known = _known(2, seed=11, holes=[HOLES[0], (slice(0, 0), slice(0, 0))])
    res = sample(LocalityDenoiser(make_table(2, N, K), GRID), (2, *GRID), 8,
                 strategy=LADR.preset("nano"), known=known)
    assert torch.equal(res.tokens[1], known.tokens[1]) and res.nfe >= 1


def test_ladr_rescues_at_the_known_border_from_the_first_step() -> None:
    """With known neighbours the frontier exists before any token is generated: the nano preset
    (seen-only frontier) rescues at step 0, only next to known tokens."""
    hole = _known(1, seed=12, holes=[(slice(0, 6), slice(1, 6))]).generate
    known = KnownTokens(torch.full((1, N), 3), hole)  # one known code: a confident border
    table = make_table(1, N, K, seed=13, scale=0.5)  # weak table: neighbours decide
    first: list[dict] = []
    sample(LocalityDenoiser(table, GRID, coupling=4.0), (1, *GRID), 64,
           strategy=LADR.preset("nano"), temperature=0.0, known=known,
           callback=lambda r: first.append(r) if r["step"] == 0 else None)
    rescued = first[0]["rescued"]
    assert rescued.any()
    assert not (rescued & ~frontier(known.generate, GRID)).any()


def test_bad_known_arguments_are_refused() -> None:
    den = LocalityDenoiser(make_table(1, N, K), GRID)
    ok_gen = torch.ones(1, N, dtype=torch.bool)
    with pytest.raises(ValueError, match="known must be None or a ladr_core.KnownTokens"):
        sample(den, (1, *GRID), 4, known=(torch.zeros(1, N), ok_gen))
    with pytest.raises(ValueError, match=r"known.tokens must be a tensor \[B=1, N=36\]"):
        sample(den, (1, *GRID), 4, known=KnownTokens(torch.zeros(1, 35, dtype=torch.long),
                                                       ok_gen))
    with pytest.raises(ValueError, match="known.generate must be a BoolTensor"):
        sample(den, (1, *GRID), 4, known=KnownTokens(torch.zeros(1, N, dtype=torch.long),
                                                       ok_gen.float()))
    with pytest.raises(ValueError, match="integer codes"):
        sample(den, (1, *GRID), 4, known=KnownTokens(torch.zeros(1, N), ok_gen))
    half = torch.arange(N).unsqueeze(0) < 18
    with pytest.raises(ValueError, match="codes >= 0"):
        sample(den, (1, *GRID), 4, known=KnownTokens(torch.full((1, N), -1), half))
    calls: list[int] = []

    def fixed(tokens: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        return make_table(1, N, K)

    with pytest.raises(ValueError, match=r"hold code 12 but .* K=12"):
        sample(fixed, (1, *GRID), 4, known=KnownTokens(torch.full((1, N), K), half))
    assert len(calls) == 1 and not den.calls  # refused at the first call, before any step
