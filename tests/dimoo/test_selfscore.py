"""The self-score (ladr_core/dimoo/tasks/selfscore.py): re-mask patterns, agreement with the
denoiser's own forward path, determinism, batching, cost, and what it must tell apart."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import ladr_core
from ladr_core import Baseline
from ladr_core.dimoo.tasks.selfscore import KINDS, SelfScoreConfig, block_masks

PROMPTS = ["a red circle", "a blue square left of a green circle", "the square", "a circle"]


@pytest.fixture(scope="module")
def sampled(pipe):
    return pipe.generate(PROMPTS, steps=6, seed=3, strategy=Baseline(), decode=False).tokens


@pytest.mark.parametrize("kwargs, field", [
    ({"passes": 0}, "passes"), ({"passes": 5}, "passes"), ({"passes": True}, "passes"),
    ({"block": 0}, "block"), ({"fraction": 0.0}, "fraction"), ({"fraction": 1.5}, "fraction"),
    ({"kind": "clip"}, "kind")])
def test_config_refuses_bad_values_naming_the_field(kwargs, field) -> None:
    with pytest.raises(ValueError, match=f"self-score {field}"):
        SelfScoreConfig(**kwargs)


def test_block_masks_partition_the_grid_into_whole_squares() -> None:
    cfg = SelfScoreConfig(passes=4, block=2, fraction=0.25)
    for seed in range(20):
        m = block_masks((7, 9), cfg, torch.Generator().manual_seed(seed))
        assert m.shape == (4, 63) and (m.sum(dim=1) >= 1).all()
        assert (m.sum(dim=0) <= 1).all()  # disjoint passes
    a = block_masks((8, 8), cfg, torch.Generator().manual_seed(1))
    b = block_masks((8, 8), cfg, torch.Generator().manual_seed(1))
    c = block_masks((8, 8), cfg, torch.Generator().manual_seed(2))
    assert torch.equal(a, b) and not torch.equal(a, c)
    full = block_masks((8, 8), SelfScoreConfig(passes=2, block=4, fraction=0.5),
                       torch.Generator().manual_seed(0))
    assert (full.sum(dim=0) == 1).all()  # 2 passes x 1/2 of the squares: every token once


def test_a_masked_token_brings_its_whole_square() -> None:
    """For one offset in [0, 3)^2, every 3 x 3 tile (cut at the edges) is all or nothing."""
    idx = torch.arange(9)
    for seed in range(10):
        m = block_masks((9, 9), SelfScoreConfig(passes=1, block=3, fraction=0.3),
                        torch.Generator().manual_seed(seed))[0].view(9, 9)
        tiled = []
        for oy in range(3):
            for ox in range(3):
                sq = ((idx[:, None] + oy) // 3) * 10 + (idx[None, :] + ox) // 3
                tiled.append(all(m[sq == s].all() or not m[sq == s].any() for s in sq.unique()))
        assert any(tiled) and 0 < int(m.sum()) < 81


def test_guided_component_equals_the_samplers_denoiser(pipe, sampled) -> None:
    """The score's log p must be what the sampler's own denoise() call assigns."""
    cfg = SelfScoreConfig(passes=1, block=2, fraction=0.5)
    res = pipe.self_score(sampled, PROMPTS, seed=11, config=cfg)
    grid = (8, 8)
    for i, prompt in enumerate(PROMPTS):
        masked = block_masks(grid, cfg, torch.Generator().manual_seed(11 + i))[0][None]
        for kind, denoise in (("guided", pipe.make_denoiser(prompt)),
                              ("cond", pipe.make_denoiser(prompt, cfg=0.0))):
            logp = denoise(sampled[i:i + 1], masked).log_softmax(-1)
            want = logp[0].gather(1, sampled[i][:, None])[:, 0][masked[0]].mean()
            assert float(getattr(res, kind)[i]) == pytest.approx(float(want), abs=1e-5), kind
    assert torch.allclose(res.adherence, res.cond - res.uncond)
    assert torch.equal(res.score, res.guided)


def test_deterministic_and_independent_of_chunk_and_position(pipe, sampled) -> None:
    cfg = SelfScoreConfig(passes=2)
    whole = pipe.self_score(sampled, PROMPTS, seed=7, config=cfg, chunk=8)
    again = pipe.self_score(sampled, PROMPTS, seed=7, config=cfg, chunk=1)
    other = pipe.self_score(sampled, PROMPTS, seed=8, config=cfg, chunk=8)
    for k in KINDS:
        assert torch.allclose(getattr(whole, k), getattr(again, k), atol=1e-5), k
    assert not torch.allclose(whole.cond, other.cond)
    alone = pipe.self_score(sampled[2:3], PROMPTS[2], seed=9, config=cfg)
    assert float(alone.guided[0]) == pytest.approx(float(whole.guided[2]), abs=1e-5)
    assert whole.calls == 1 and again.calls == len(PROMPTS)
    real = sum(pipe.make_denoiser([p, p]).real_tokens for p in PROMPTS)
    assert whole.token_forwards == again.token_forwards == real


def test_without_guidance_there_is_no_uncond_row(pipe, sampled) -> None:
    res = pipe.self_score(sampled, PROMPTS, cfg=0.0)
    assert torch.isnan(res.uncond).all() and torch.isnan(res.adherence).all()
    assert torch.equal(res.guided, res.cond)


def test_generate_reports_the_same_score_opt_in(pipe) -> None:
    plain = pipe.generate(PROMPTS[:2], steps=5, seed=4, strategy=Baseline(), decode=False)
    assert plain.self_score is None
    cfg = SelfScoreConfig(passes=2)
    res = pipe.generate(PROMPTS[:2], steps=5, seed=4, strategy=Baseline(), decode=False,
                        self_score=cfg)
    direct = pipe.self_score(res.tokens, PROMPTS[:2], seed=4, config=cfg)
    assert torch.equal(res.tokens, plain.tokens)
    assert torch.allclose(res.self_score.score, direct.score)


@pytest.mark.parametrize("call, match", [
    (lambda p, t: p.self_score(t[:, :10], PROMPTS), "codes per image"),
    (lambda p, t: p.self_score(t, PROMPTS[:3]), "3 prompts for 4 images"),
    (lambda p, t: p.self_score(t + 10_000, PROMPTS), r"image codes in \[0, 32\)"),
    (lambda p, t: p.self_score(t[0], PROMPTS), r"LongTensor \[B, h\*w\]"),
    (lambda p, t: p.self_score(t, PROMPTS, chunk=0), "chunk must be an int >= 1")])
def test_bad_input_gets_one_clear_error(pipe, sampled, call, match) -> None:
    with pytest.raises(ValueError, match=match):
        call(pipe, sampled)


NANO = Path(ladr_core.nano_model_path())


@pytest.mark.skipif(not (NANO / "model.safetensors").is_file(), reason="nano not shipped")
def test_nano_scores_its_own_images_above_corrupted_ones() -> None:
    """The property the validation rests on: tokens the model would produce score higher than
    the same images with a fifth of their tokens replaced at random."""
    nano = ladr_core.load_dimoo(NANO, dtype=torch.float32)
    captions = ["a red circle", "a blue square and a green triangle", "two circles"]
    tokens = nano.generate(captions, steps=16, seed=0, strategy=Baseline(), decode=False).tokens
    g = torch.Generator().manual_seed(0)
    swap = torch.rand(tokens.shape, generator=g) < 0.2
    noise = torch.randint(0, nano.ids.codebook_size, tokens.shape, generator=g)
    broken = torch.where(swap, noise, tokens)
    good = nano.self_score(tokens, captions, seed=1)
    bad = nano.self_score(broken, captions, seed=1)
    assert (good.score > bad.score).all() and (good.cond > bad.cond).all()


def test_the_stats_line_shows_the_score_only_when_asked(pipe) -> None:
    from nodes import events

    plain = pipe.generate(PROMPTS[:2], steps=4, seed=1, strategy=Baseline(), decode=False)
    scored = pipe.generate(PROMPTS[:2], steps=4, seed=1, strategy=Baseline(), decode=False,
                           self_score=SelfScoreConfig(passes=3))
    assert "self_score" not in events.stats_dict(plain, "baseline")
    stats = events.stats_dict(scored, "baseline")
    assert stats["self_score"] == [round(float(v), 4) for v in scored.self_score.score]
    assert stats["self_score_passes"] == 3
    line = events.stats_text(stats)
    assert "self-score" in line and "3 extra passes per image" in line
    assert events.stats_text(events.stats_dict(plain, "baseline")).count("self-score") == 0


def test_a_rolling_batch_scores_each_image_as_its_single_run(pipe) -> None:
    """Items leave and join the pass (max_batch=1): the tokens and the score of each image are
    those of its own run; the score costs ``passes`` calls per image, at most 4."""
    cfg = SelfScoreConfig(passes=4)
    rolled = pipe.generate(PROMPTS[:3], steps=5, seed=2, strategy=Baseline(), decode=False,
                           max_batch=1, self_score=cfg)
    for i, prompt in enumerate(PROMPTS[:3]):
        single = pipe.generate(prompt, steps=5, seed=2 + i, strategy=Baseline(), decode=False,
                               self_score=cfg)
        assert torch.equal(rolled.tokens[i], single.tokens[0])
        assert torch.allclose(rolled.self_score.score[i], single.self_score.score[0])
    assert rolled.self_score.calls == 1  # 3 images x 4 copies in one packed pass
    with pytest.raises(ValueError, match=r"passes must be an int in \[1, 4\]"):
        SelfScoreConfig(passes=5)
