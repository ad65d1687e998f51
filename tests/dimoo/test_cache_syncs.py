"""An ML-Cache adds no host sync to a step: its counts come one call late.

Counted with tests.kit.syncs.SyncCounter around sample() with the tiny model's denoiser
(made outside the count: laying out the prompt rows is host work). On a GPU the same limit is
counted by CUDA (torch.cuda.set_sync_debug_mode) by lab/benchmarks/gpu_check, section a.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.overrides import TorchFunctionMode

from ladr_core import LADR, sample
from ladr_core.dimoo import DiMOOPipeline, MLCacheConfig, load_dimoo
from ladr_core.dimoo.denoise.hostlag import HostLag
from tests.kit.syncs import SyncCounter, sampler_reads

PROMPTS = ["a red circle left of a blue square", "green"]
CACHES = {
    "none": None,
    "official": MLCacheConfig(),
    "ladr": MLCacheConfig.ladr(),
    "changed": MLCacheConfig(recompute_changed=True, warmup_ratio=0.0),
}


def test_host_lag_hands_each_value_to_the_next_read() -> None:
    lag = HostLag()
    assert lag.read() is None
    lag.post(torch.tensor([3, 1, 0]))
    src = torch.tensor([5, 2, 1])
    assert lag.read() == [3, 1, 0]
    assert lag.read() is None  # read once
    lag.post(src)
    src.zero_()  # the host copy is the posted value, not a view of the device tensor
    assert lag.read() == [5, 2, 1] and lag.waits == 0


@pytest.mark.parametrize("strategy", ["baseline", "ladr"])
@pytest.mark.parametrize("cache", list(CACHES))
def test_a_cached_run_syncs_once_per_step(pipe: DiMOOPipeline, strategy: str, cache: str) -> None:
    steps = 12
    den = pipe.make_denoiser(PROMPTS, None, width=16, height=16, cfg=2.0, cache=CACHES[cache],
                             steps=steps)
    chosen = LADR.preset("nano") if strategy == "ladr" else strategy
    with SyncCounter() as counter:
        res = sample(den, shape=(2, 4, 4), steps=steps, strategy=chosen,
                     generator=[torch.Generator().manual_seed(i) for i in range(2)])
    assert res.steps > 1
    # the sampler's one read per step and nothing else
    assert counter.total == sampler_reads(res.steps, steps), dict(counter.counts)
    assert den.stats.host_waits == 0
    if cache != "none":
        assert den.stats.cached_steps > 0  # the cache was used, not bypassed


def _states(n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Masks of a run that re-masks slot 0 after committing it (no sampler here does)."""
    tokens = torch.zeros(2, n, dtype=torch.long)
    full = torch.ones(2, n, dtype=torch.bool)
    first = full.clone()
    first[:, :4] = False
    second = first.clone()
    second[:, 4:6] = False
    remasked = second.clone()
    remasked[:, 0] = True
    return [(tokens, full), (tokens, first), (tokens, second), (tokens, remasked), (tokens, remasked)]


def test_a_sampler_that_re_masks_tokens_is_refused(pipe: DiMOOPipeline) -> None:
    """recompute_masked sizes a cached pass by the previous call's masked count, which holds
    only while committed tokens stay committed; a re-mask is caught at the next call."""
    cache = MLCacheConfig(cache_ratio=0.9, warmup_ratio=0.0, refresh_interval=99,
                          refresh_commit=0.0, recompute_masked=True)
    den = pipe.make_denoiser(PROMPTS, None, width=16, height=12, cfg=2.0, cache=cache, steps=8)
    states = _states(12)
    for tokens, masked in states[:4]:
        den(tokens, masked)  # the 4th call recomputes too few slots and flags it
    assert den.stats.cached_steps == 3
    with pytest.raises(RuntimeError, match="re-masked"):
        den(*states[4])


class _ListIndexes(TorchFunctionMode):
    """Records every tensor indexing whose index holds a Python list: on a GPU torch copies
    such a list to the device from pageable memory, a copy the host waits for."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[object] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        if getattr(func, "__name__", "") in ("__getitem__", "__setitem__") and len(args) > 1:
            index = args[1] if isinstance(args[1], tuple) else (args[1],)
            if any(isinstance(i, list) for i in index):
                self.found.append(args[1])
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("items", [1, 2])
def test_cache_refreshes_and_cached_calls_index_with_no_host_lists(
        pipe: DiMOOPipeline, items: int) -> None:
    """Before, a refresh stored each item's rows as ``logits[[a, a + A]]``, a host
    list per item per refresh; each item's rows are a strided slice now."""
    cache = MLCacheConfig(cache_ratio=0.75, warmup_ratio=0.0, refresh_interval=2,
                          recompute_changed=True)
    den = pipe.make_denoiser(PROMPTS[:items], None, width=16, height=12, cfg=2.0, cache=cache,
                             steps=8)
    states = _states(12)
    with _ListIndexes() as mode:
        for tokens, masked in states[:4]:
            den(tokens[:items], masked[:items])
    assert den.stats.refresh_steps == 2 and den.stats.cached_steps == 2
    assert mode.found == []
    for i in range(items):  # each item's cache owns its logits (not a view of another's)
        own = den.item(i).logits
        assert own.is_contiguous() and own.shape[0] == 2


def test_a_denoiser_copies_no_prompt_batch_to_the_device(dimoo_checkpoint: Path) -> None:
    """Before, the padded input_ids / attention_mask (read by nothing but tests)
    were copied to the model's device, two blocking copies per run; they stay on the host.
    A model on the meta device shows where the copies would go."""
    meta_pipe = load_dimoo(dimoo_checkpoint, dtype=torch.float32)
    meta_pipe.transformer.to("meta")
    den = meta_pipe.make_denoiser(PROMPTS, None, width=16, height=12, cfg=2.0)
    assert den.device == torch.device("meta") and den.pack(den.all_items).ids.is_meta
    assert den.input_ids.device.type == "cpu" and den.attention_mask.device.type == "cpu"
