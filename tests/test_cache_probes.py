"""benchmarks/cache_probes.py: the probes do what the sweep's table says, and leave no patch."""

from __future__ import annotations

import pytest
import torch

from benchmarks.cache_probes import probe
from ladr_core import MLCacheConfig, load_dimoo, nano_model_path
from ladr_core.dimoo.cache import BranchCache
from ladr_core.dimoo.denoiser import DiMOODenoiser

PROMPT = "a red circle left of a blue square"


@pytest.fixture(scope="module")
def pipe():
    return load_dimoo(nano_model_path(), dtype=torch.float32)


def _two_calls(pipe, cache):
    """Logits of a second call (a third of the image committed) after a refresh."""
    den = pipe.make_denoiser(PROMPT, cfg=0.75, cache=cache, steps=64)
    n = den.layout.n_codes
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, pipe.ids.codebook_size, (1, n), generator=gen)
    masked = torch.ones(1, n, dtype=torch.bool)
    den(tokens, masked)
    masked[0, torch.randperm(n, generator=gen)[: n // 3]] = False
    return den, den(tokens, masked)


def test_text_fresh_with_every_code_slot_recomputes_everything(pipe):
    """text_fresh + every code slot recomputed = a full pass on a cached call (same logits),
    and the cached call really was one (the plain cache's are not equal)."""
    every_slot = MLCacheConfig(cache_ratio=1e-6, warmup_ratio=0.0, refresh_interval=100,
                               refresh_commit=0.0, recompute_masked=True)
    _, full = _two_calls(pipe, None)
    with probe("text_fresh", pipe.ids.mask):
        den, fresh = _two_calls(pipe, every_slot)
    assert den.stats.cached_steps == 1
    assert den.stats.token_forwards == 2 * den.real_tokens
    torch.testing.assert_close(fresh, full, atol=2e-4, rtol=0)
    _, stale_text = _two_calls(pipe, every_slot)
    assert (stale_text - full).abs().max() > 1e-3


def test_uncond_stale_keeps_the_refresh_logits_of_masked_uncond_slots(pipe):
    cache = MLCacheConfig(warmup_ratio=0.0, refresh_interval=100, refresh_commit=0.0,
                          recompute_masked=True)
    _, plain = _two_calls(pipe, cache)
    with probe("uncond_stale", pipe.ids.mask) as counter:
        den, lean = _two_calls(pipe, cache)
    assert counter["uncounted"] > 0
    assert not torch.equal(plain, lean)


def test_masked_top_recomputes_changed_slots_and_the_most_confident_masked_half(pipe):
    cache = MLCacheConfig(warmup_ratio=0.0, refresh_interval=100, refresh_commit=0.0,
                          recompute_changed=True)
    den = pipe.make_denoiser(PROMPT, cfg=0.75, cache=cache, steps=64)
    n = den.layout.n_codes
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, pipe.ids.codebook_size, (1, n), generator=gen)
    masked = torch.ones(1, n, dtype=torch.bool)
    with probe("masked_top:0.5", pipe.ids.mask):
        den(tokens, masked)
        first = den.branches.logits.clone()
        conf = den.branches.max_logit[0].clone()  # the cond row's, ranks both rows
        masked[0, torch.randperm(n, generator=gen)[: n // 3]] = False
        den(tokens, masked)
    still = masked[0].nonzero().squeeze(1)
    top = still[conf[still].argsort(descending=True, stable=True)[: -(-len(still) // 2)]]
    rest = still[~torch.isin(still, top)]
    fresh = den.branches.logits
    assert den.stats.cached_steps == 1
    assert den.stats.token_forwards == den.real_tokens + 2 * (n // 3 + len(top))
    assert torch.equal(fresh[:, rest], first[:, rest])  # the least confident half: stale
    assert (fresh[:, top] - first[:, top]).abs().amax(dim=-1).min() > 0  # all recomputed


def test_probes_restore_the_cache_path_and_name_bad_probes(pipe):
    before = DiMOODenoiser._cached, BranchCache.update
    with pytest.raises(RuntimeError), probe("text_fresh", pipe.ids.mask):
        raise RuntimeError("boom")
    assert (DiMOODenoiser._cached, BranchCache.update) == before
    with pytest.raises(ValueError, match="probe must be one of"), probe("fastest", pipe.ids.mask):
        pass
