"""Self-score rounds (SelfScoreConfig.rounds): independent placements of the re-masked blocks,
their masks, their cost and their score (the mean over every re-masked token of every round)."""

from __future__ import annotations

import pytest
import torch

import ladr_core
from ladr_core import Baseline
from ladr_core.dimoo.selfscore import SelfScoreConfig, block_masks

PROMPTS = ["a red circle", "a blue square left of a green circle"]


@pytest.mark.parametrize("rounds", [0, 9, True, 1.5])
def test_rounds_must_be_an_int_from_1_to_8(rounds) -> None:
    with pytest.raises(ValueError, match=r"self-score rounds must be an int in \[1, 8\]"):
        SelfScoreConfig(rounds=rounds)


def test_each_round_is_a_fresh_placement_and_the_first_is_one_round() -> None:
    one = SelfScoreConfig(passes=4, block=2, fraction=0.25)
    three = SelfScoreConfig(passes=4, block=2, fraction=0.25, rounds=3)
    assert one.calls == 4 and three.calls == 12
    for seed in range(10):
        a = block_masks((12, 12), one, torch.Generator().manual_seed(seed))
        m = block_masks((12, 12), three, torch.Generator().manual_seed(seed))
        assert m.shape == (12, 144) and torch.equal(m[:4], a)
        rounds = m.view(3, 4, 144)
        assert (rounds.sum(dim=1) <= 1).all()  # disjoint passes within a round
        assert not torch.equal(rounds[1], rounds[0]) or not torch.equal(rounds[2], rounds[0])


def test_a_score_over_rounds_is_the_mean_over_all_their_tokens(tmp_path) -> None:
    from testbed.tiny_checkpoint import write_tiny_checkpoint

    pipe = ladr_core.load_dimoo(write_tiny_checkpoint(tmp_path / "ckpt"), dtype=torch.float32)
    tokens = pipe.generate(PROMPTS, steps=4, seed=1, strategy=Baseline(), decode=False).tokens
    cfg = SelfScoreConfig(passes=2, block=2, fraction=0.5, rounds=2)
    res = pipe.self_score(tokens, PROMPTS, seed=5, config=cfg)
    assert res.calls == 1 and res.token_forwards > 0
    for i, prompt in enumerate(PROMPTS):
        masks = block_masks((8, 8), cfg, torch.Generator().manual_seed(5 + i))
        denoise = pipe.make_denoiser(prompt)
        got, count = 0.0, 0
        for m in masks:
            logp = denoise(tokens[i:i + 1], m[None]).log_softmax(-1)[0]
            got += float(logp.gather(1, tokens[i][:, None])[:, 0][m].sum())
            count += int(m.sum())
        assert float(res.guided[i]) == pytest.approx(got / count, abs=1e-5)
