"""Batched CFG denoiser and ML-Cache on the tiny checkpoint (float32, CPU)."""

from __future__ import annotations

import math

import pytest
import torch

from ladr_core.dimoo import DiMOOPipeline, MLCacheConfig
from ladr_core.dimoo.denoise.prompt import ImageLayout, cond_text, uncond_text

PROMPTS = ["a red circle left of a blue square", "green"]  # different lengths -> padding


def _state(b: int, n: int, k: int, seed: int, frac: float = 0.5) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    masked = torch.rand(b, n, generator=g) < frac
    tokens = torch.randint(0, k, (b, n), generator=g).masked_fill(masked, 0)
    return tokens, masked


def _official_two_pass(pipe: DiMOOPipeline, prompt: str, negative: str | None, tokens: torch.Tensor,
                       masked: torch.Tensor, layout: ImageLayout, cfg: float) -> torch.Tensor:
    """Official generate_image: unpadded cond and uncond sequences, separate passes, full vocab."""
    ids = pipe.ids
    image = torch.tensor(layout.tokens(ids))
    image[layout.code_offsets()] = torch.where(masked, ids.mask, tokens + ids.image_offset)
    outs = []
    for text in (cond_text(prompt), uncond_text(negative)):
        prefix = torch.tensor(pipe.encode(text))
        seq = torch.cat([prefix, image])[None]
        with torch.no_grad():
            logits = pipe.transformer(seq)[0]
        codes = len(prefix) + layout.code_offsets()
        outs.append(logits[codes, ids.image_offset: ids.image_offset + ids.codebook_size])
    return (1 + cfg) * outs[0] - cfg * outs[1]


@pytest.mark.parametrize("negative", [None, "blue"])
def test_batched_cfg_equals_two_separate_passes(pipe: DiMOOPipeline, negative: str | None) -> None:
    den = pipe.make_denoiser(PROMPTS, negative, width=16, height=12, cfg=3.0)
    assert not den.attention_mask.all()  # rows really are padded
    tokens, masked = _state(2, 12, 32, seed=1)
    got = den(tokens, masked)
    assert got.shape == (2, 12, 32) and got.dtype == torch.float32
    for i, prompt in enumerate(PROMPTS):
        ref = _official_two_pass(pipe, prompt, negative, tokens[i], masked[i], den.layout, 3.0)
        assert (got[i] - ref).abs().max().item() <= 1e-4
    assert den.stats.nfe == 1
    assert den.stats.token_forwards == den.stats.token_forwards_full == int(den.attention_mask.sum())


def test_cfg_zero_runs_cond_rows_only(pipe: DiMOOPipeline) -> None:
    den = pipe.make_denoiser(PROMPTS, None, width=16, height=12, cfg=0.0)
    assert den.input_ids.shape[0] == 2
    tokens, masked = _state(2, 12, 32, seed=2)
    got = den(tokens, masked)
    ref = _official_two_pass(pipe, PROMPTS[1], None, tokens[1], masked[1], den.layout, 0.0)
    assert (got[1] - ref).abs().max().item() <= 1e-4
    assert den.stats.token_forwards == sum(len(pipe.encode(cond_text(p))) + den.layout.length for p in PROMPTS)
    guided = pipe.make_denoiser(PROMPTS, None, width=16, height=12, cfg=3.0)(tokens, masked)
    assert (guided - got).abs().max() > 1e-3  # guidance really changes the logits


def test_denoiser_rejects_bad_arguments(pipe: DiMOOPipeline) -> None:
    with pytest.raises(ValueError, match="cfg must be"):
        pipe.make_denoiser("a", cfg=-1.0, width=16, height=16)
    with pytest.raises(ValueError, match="steps"):
        pipe.make_denoiser("a", cfg=1.0, width=16, height=16, cache=MLCacheConfig())
    den = pipe.make_denoiser("a", width=16, height=16)
    with pytest.raises(ValueError, match="tokens shape"):
        den(torch.zeros(1, 5, dtype=torch.long), torch.ones(1, 5, dtype=torch.bool))


def test_mlcache_config_official_refresh_rule_and_validation() -> None:
    cfg = MLCacheConfig()
    assert (cfg.cache_ratio, cfg.warmup_ratio, cfg.refresh_interval) == (0.9, 0.3, 5)
    assert [s for s in range(12) if cfg.is_refresh(s, 10)] == [0, 1, 2, 3, 8]  # warmup int(3)
    assert [s for s in range(64) if cfg.is_refresh(s, 64)] == list(range(20)) + [24, 29, 34, 39, 44, 49, 54, 59]
    assert cfg.n_recompute(100) == 10 and cfg.n_recompute(12) == 2 and cfg.n_recompute(3) == 1
    for bad in ({"cache_ratio": 1.0}, {"warmup_ratio": -0.1}, {"refresh_interval": 0}, {"cache_ratio": True}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            MLCacheConfig(**bad)  # type: ignore[arg-type]


def _baseline_states(steps: int, seed: int, n: int = 12, k: int = 32) -> list:
    """States whose masked count per call is the official baseline's (N, then its keep table
    floor(N * cos(pi/2 * s / T))), nested like a real run: the cache schedule's progress step
    then equals the call index, as it does under the baseline sampler."""
    g = torch.Generator().manual_seed(seed)
    order = torch.rand(2, n, generator=g).argsort(dim=1)  # unmasking order per item
    tokens = torch.randint(0, k, (2, n), generator=g)
    states = []
    for s in range(steps):
        count = n if s == 0 else max(1, int(n * math.cos(math.pi / 2 * s / steps)))
        masked = torch.zeros(2, n, dtype=torch.bool).scatter_(1, order[:, :count], True)
        states.append((tokens.masked_fill(masked, 0), masked))
    return states


def _run_steps(pipe: DiMOOPipeline, cache: MLCacheConfig | None, states: list) -> tuple[list, object]:
    den = pipe.make_denoiser(PROMPTS, None, width=16, height=12, cfg=2.0, cache=cache, steps=len(states))
    return [den(t, m) for t, m in states], den


def test_mlcache_equals_no_cache_on_refresh_steps_and_counts_tokens(pipe: DiMOOPipeline) -> None:
    cache = MLCacheConfig(cache_ratio=0.75, warmup_ratio=0.2, refresh_interval=3)  # T=10: warm 2
    states = _baseline_states(10, seed=10)
    fresh, plain = _run_steps(pipe, None, states)
    cached, den = _run_steps(pipe, cache, states)
    refresh = [s for s in range(10) if cache.is_refresh(s, 10)]
    assert refresh == [0, 1, 2, 5, 8]
    for s in range(10):
        diff = (cached[s] - fresh[s]).abs().max().item()
        if s in refresh:
            assert diff <= 1e-5, (s, diff)
        else:
            assert diff > 1e-4, s  # stale K/V and logits are really reused
    rows, m = 4, cache.n_recompute(12)  # 2 prompts x (cond, uncond); 3 of 12 code slots
    full = int(den.attention_mask.sum())
    assert den.stats.refresh_steps == 5 and den.stats.cached_steps == 5
    assert den.stats.token_forwards == 5 * full + 5 * rows * m
    assert den.stats.token_forwards_full == plain.stats.token_forwards_full == 10 * full


def test_mlcache_cached_step_is_exact_when_nothing_changed(pipe: DiMOOPipeline) -> None:
    """With unchanged inputs the cached K/V are current, so a cached step equals a full pass."""
    state = _state(2, 12, 32, seed=3)
    cache = MLCacheConfig(cache_ratio=0.5, warmup_ratio=0.0, refresh_interval=4)
    outs, den = _run_steps(pipe, cache, [state] * 4)
    assert den.stats.cached_steps == 3
    for out in outs[1:]:
        assert (out - outs[0]).abs().max().item() <= 1e-4


def test_mlcache_recomputes_lowest_max_logit_slots(pipe: DiMOOPipeline) -> None:
    cache = MLCacheConfig(cache_ratio=0.75, warmup_ratio=0.0, refresh_interval=10)
    den = pipe.make_denoiser(PROMPTS, None, width=16, height=12, cfg=2.0, cache=cache, steps=10)
    tokens, masked = _state(2, 12, 32, seed=4)
    den(tokens, masked)
    for item in range(2):  # each item's cache: its (cond, uncond) rows' code-slot logits
        raw = den.item(item).logits.clone()
        chosen = den.item(item).next_index
        lowest = raw.amax(-1).argsort(dim=1)[:, :3]
        assert chosen.shape == (2, 3)
        assert torch.equal(chosen.sort(dim=1).values, lowest.sort(dim=1).values)
