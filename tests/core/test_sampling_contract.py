"""sample() contract (docs/ARCHITECTURE.md section 1): record, batching, generators, determinism."""

from __future__ import annotations

import pytest
import torch
from support import strategy_from

from ladr_core import LADR, LADRPolicy, Prophet, sample
from ladr_core.sampling import STEP_RECORD_KEYS, SampleResult
from tests.kit.fakes import LocalityDenoiser, make_table

GRID = (6, 6)
N = 36
K = 10

CONFIGS = [
    ("baseline", LADRPolicy()),
    ("prophet", None),
    ("ladr", LADRPolicy()),
    ("ladr", LADRPolicy(candidates="random")),
    ("ladr", LADRPolicy(metric="random", candidates="non_neighbors")),
    ("ladr", LADRPolicy(tau=(0.3, 0.3, 0.3), alpha=(1.0, 1.0, 1.0), selection="gumbel",
                        rescue_token="argmax", seen_only=True)),
]
IDS = ["baseline", "prophet", "ladr", "ladr-random-cand", "ladr-random-nonneigh", "ladr-gumbel"]


def _gens(seeds):
    return [torch.Generator().manual_seed(s) for s in seeds]


def test_step_record_holds_documented_keys_types_and_shapes() -> None:
    den = LocalityDenoiser(make_table(2, N, K), GRID)
    records: list[dict] = []
    res = sample(den, (2, *GRID), 8, strategy="ladr", temperature=1.0, generator=_gens([0, 1]),
                 callback=records.append)
    assert isinstance(res, SampleResult)
    assert res.tokens.dtype == torch.long and res.tokens.shape == (2, N)
    assert ((res.tokens >= 0) & (res.tokens < K)).all()
    for i, rec in enumerate(records):
        assert set(STEP_RECORD_KEYS) <= set(rec)
        assert rec["step"] == i and rec["steps"] == 8 and rec["strategy"] == "ladr"
        assert rec["nfe"] == i + 1 and rec["grid"] == GRID
        for key in ("masked", "rescued", "unmasked"):
            assert rec[key].dtype == torch.bool and rec[key].shape == (2, N)
        assert rec["tokens"].dtype == torch.long and rec["tokens"].shape == (2, N)
        assert rec["t_eff"].dtype == torch.float32 and rec["t_eff"].shape == (2,)
        assert rec["phase"].dtype == torch.long and rec["phase"].shape == (2,)
        assert not (rec["rescued"] & ~rec["unmasked"]).any()
    assert torch.equal(records[-1]["tokens"], res.tokens)
    assert res.nfe == res.steps == len(records)


def test_denoiser_sees_zeros_at_masked_positions_and_decoded_tokens_elsewhere() -> None:
    den = LocalityDenoiser(make_table(1, N, K), GRID)
    res = sample(den, (1, *GRID), 6, strategy="baseline", temperature=1.0,
                 generator=torch.Generator().manual_seed(3))
    for tokens, masked, _ in den.calls:
        assert (tokens[masked] == 0).all()
        assert torch.equal(tokens[~masked], res.tokens[~masked])
    assert den.calls[0][1].all()


@pytest.mark.parametrize(("strategy", "policy"), CONFIGS, ids=IDS)
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_batch_item_equals_single_run_with_its_generator(strategy, policy, temperature) -> None:
    den = LocalityDenoiser(make_table(3, N, K, seed=7), GRID)
    batch = sample(den, (3, *GRID), 10, strategy=strategy_from(strategy, policy),
                   temperature=temperature, generator=_gens([10, 11, 12]))
    for i in range(3):
        single = sample(den.item(i), (1, *GRID), 10, strategy=strategy_from(strategy, policy),
                        temperature=temperature, generator=_gens([10 + i])[0])
        assert torch.equal(batch.tokens[i : i + 1], single.tokens), f"item {i}"
        assert single.steps <= batch.steps


@pytest.mark.parametrize(("strategy", "policy"), CONFIGS, ids=IDS)
def test_same_seed_same_tokens_other_seed_other_tokens(strategy, policy) -> None:
    den = LocalityDenoiser(make_table(1, N, K, seed=2), GRID, coupling=0.3)

    def run(seed: int) -> torch.Tensor:
        g = torch.Generator().manual_seed(seed)
        return sample(den, (1, *GRID), 8, strategy=strategy_from(strategy, policy), temperature=1.0,
                      generator=g).tokens

    assert torch.equal(run(0), run(0))
    assert not torch.equal(run(0), run(1))


def test_one_shared_generator_serves_items_in_order() -> None:
    """A single generator for B > 1 is the same as the list [g] * B (items draw in turn)."""
    den = LocalityDenoiser(make_table(2, N, K, seed=4), GRID)
    a = sample(den, (2, *GRID), 8, temperature=1.0, generator=torch.Generator().manual_seed(5))
    g = torch.Generator().manual_seed(5)
    b = sample(den, (2, *GRID), 8, temperature=1.0, generator=[g, g])
    assert torch.equal(a.tokens, b.tokens)
    assert not torch.equal(a.tokens[0], a.tokens[1])


@pytest.mark.parametrize("strategy", ["baseline", "ladr", "prophet"])
def test_temperature_zero_draws_nothing_and_is_deterministic(strategy) -> None:
    den = LocalityDenoiser(make_table(1, N, K, seed=8), GRID)
    g = torch.Generator().manual_seed(0)
    state = g.get_state()
    torch.manual_seed(123)
    global_state = torch.get_rng_state()
    a = sample(den, (1, *GRID), 8, strategy=strategy, temperature=0.0, generator=g)
    b = sample(den, (1, *GRID), 8, strategy=strategy, temperature=0.0)
    assert torch.equal(a.tokens, b.tokens)
    assert torch.equal(g.get_state(), state)
    assert torch.equal(torch.get_rng_state(), global_state)


def test_random_ablation_draws_from_the_generator_even_at_temperature_zero() -> None:
    den = LocalityDenoiser(make_table(1, N, K, seed=8), GRID, coupling=3.0)
    pol = LADRPolicy(candidates="random")

    def run(seed: int) -> torch.Tensor:
        return sample(den, (1, *GRID), 12, strategy=LADR(pol), temperature=0.0,
                      generator=torch.Generator().manual_seed(seed)).tokens

    assert torch.equal(run(1), run(1))
    outs = {tuple(run(s).tolist()[0]) for s in range(4)}
    assert len(outs) > 1


def test_prophet_commits_everything_when_the_gap_clears_the_threshold() -> None:
    from ladr_core import ProphetPolicy

    den = LocalityDenoiser(make_table(1, N, K, seed=1), GRID)
    fired = sample(den, (1, *GRID), 10, strategy=Prophet(ProphetPolicy(thresholds=(0.0, 0.0, 0.0))), temperature=0.0)
    assert fired.steps == fired.nfe == 1
    assert torch.equal(fired.tokens, den.calls[0][2].argmax(-1))
    never = sample(den, (1, *GRID), 10, strategy=Prophet(ProphetPolicy(thresholds=(1e9, 1e9, 1e9))), temperature=0.0)
    base = sample(den, (1, *GRID), 10, strategy="baseline", temperature=0.0)
    assert torch.equal(never.tokens, base.tokens) and never.steps == base.steps == 10


def test_prophet_threshold_follows_progress() -> None:
    """Gap ~ constant; thresholds (big, big, 0) fire exactly at the first step with progress
    >= 0.67, i.e. step 7 of 10."""
    from ladr_core import ProphetPolicy

    den = LocalityDenoiser(make_table(1, N, K, seed=1), GRID)
    res = sample(den, (1, *GRID), 10, strategy=Prophet(ProphetPolicy(thresholds=(1e9, 1e9, 0.0))), temperature=0.0)
    assert res.steps == 8
    pol = ProphetPolicy()
    assert [pol.threshold(s / 10) for s in (0, 3, 4, 6, 7, 9)] == [7.5, 7.5, 5.0, 5.0, 2.5, 2.5]


def test_device_argument_and_cpu_generator() -> None:
    den = LocalityDenoiser(make_table(1, N, K), GRID)
    res = sample(den, (1, *GRID), 5, temperature=1.0, device="cpu",
                 generator=torch.Generator(device="cpu").manual_seed(0))
    assert res.tokens.device.type == "cpu"


@pytest.mark.parametrize("strategy", ["baseline", "ladr", "prophet"])
def test_half_precision_logits_are_upcast_once(strategy) -> None:
    """bfloat16 logits give exactly the run on the same values in float32."""
    den = LocalityDenoiser(make_table(1, N, K, seed=6), GRID)

    def run(dtype: torch.dtype) -> torch.Tensor:
        def den_cast(tokens, masked):
            return den(tokens, masked).to(torch.bfloat16).to(dtype)

        return sample(den_cast, (1, *GRID), 8, strategy=strategy, temperature=1.0,
                      generator=torch.Generator().manual_seed(0)).tokens

    assert torch.equal(run(torch.bfloat16), run(torch.float32))


def test_callback_may_modify_the_record_without_touching_the_run() -> None:
    den = LocalityDenoiser(make_table(1, N, K, seed=3), GRID)

    def vandal(rec: dict) -> None:
        for key in ("masked", "rescued", "unmasked", "tokens", "t_eff", "phase"):
            rec[key].zero_()

    a = sample(den, (1, *GRID), 8, temperature=0.0, callback=vandal)
    b = sample(den, (1, *GRID), 8, temperature=0.0)
    assert torch.equal(a.tokens, b.tokens) and a.steps == b.steps
