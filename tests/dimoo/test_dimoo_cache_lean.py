"""ML-Cache by progress and a lean, padding-free cache, item by item: CPU, tiny model."""

from __future__ import annotations

import math

import pytest
import torch

from ladr_core import sample
from ladr_core.dimoo import DiMOOPipeline, MLCacheConfig
from ladr_core.dimoo.denoise.cache import CacheSchedule
from ladr_core.dimoo.model.packed import PackedRows
from tests.kit.live_bytes import LiveBytes

PROMPTS = ["a red circle left of a blue square", "green"]


def _baseline_counts(n: int, steps: int) -> list[int]:
    """Masked count per call of the official baseline: floor(N gamma(s / T)), >= 1 per step."""
    counts = [n]
    for s in range(1, steps):
        counts.append(max(0, min(max(1, int(n * math.cos(math.pi / 2 * s / steps))), counts[-1] - 1)))
    return counts


def _decide(sched: CacheSchedule, masked: list[int]) -> list[int]:
    """Calls the schedule makes refreshes, each seeing the previous call's count (as the
    denoiser gives it: read one call late, without a host sync)."""
    return [s for s in range(len(masked))
            if sched.refresh(masked[s - 1] if s else None, True)]


@pytest.mark.parametrize("steps", [8, 10, 64, 128])
def test_progress_schedule_is_the_official_rule_under_the_baseline(steps: int) -> None:
    """The baseline's masked counts put every call at its own index: official refresh calls."""
    cfg = MLCacheConfig() if steps == 64 else MLCacheConfig(refresh_commit=0.0)
    got = _decide(CacheSchedule(cfg, steps, 144), _baseline_counts(144, steps))
    assert got == [s for s in range(steps) if cfg.is_refresh(s, steps)]


def test_progress_schedule_engages_when_a_run_is_ahead_of_the_baseline() -> None:
    """A LADR-like run (many tokens per call) leaves warm-up when its masked ratio does."""
    off = MLCacheConfig(refresh_commit=0.0)
    masked = [144, 140, 130, 110, 100, 95, 50, 48, 46, 44, 42, 40, 30, 20, 10, 2]
    by_calls = [s for s in range(len(masked)) if off.is_refresh(s, 128)]
    assert by_calls == list(range(len(masked)))  # the call count never leaves warm-up (38)
    sched = CacheSchedule(off, 128, 144)
    assert sched.baseline_masked[38] == 106  # the baseline's count at the end of warm-up
    # call 4 sees call 3's 110 (warm-up: the baseline is there at call 34), call 5 sees 100
    # (past it); then every 5th call
    assert _decide(sched, masked) == [0, 1, 2, 3, 4, 9, 14]
    lean = CacheSchedule(MLCacheConfig(refresh_commit=0.3), 128, 144)
    # 100 -> 50 commits 35 % of N since the refresh at call 4, seen one call later (call 7):
    # refresh there, then 5 calls on
    assert _decide(lean, masked) == [0, 1, 2, 3, 4, 7, 12]


def test_packed_rows_group_runs_of_equal_length() -> None:
    rows = PackedRows.from_lengths([5, 5, 3, 4, 4])
    assert rows.runs == ((0, 2, 5, 0), (2, 1, 3, 10), (3, 2, 4, 13))
    assert rows.starts.tolist() == [0, 5, 10, 13, 17] and rows.total == 21
    assert rows.positions.tolist() == [0, 1, 2, 3, 4] * 2 + [0, 1, 2] + [0, 1, 2, 3] * 2
    with pytest.raises(ValueError, match="packed row"):
        PackedRows.from_lengths([3, 0])


def _states(steps: int, n: int, seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    order = torch.rand(2, n, generator=g).argsort(dim=1)
    tokens = torch.randint(0, 32, (2, n), generator=g)
    out = []
    for count in _baseline_counts(n, steps):
        masked = torch.zeros(2, n, dtype=torch.bool).scatter_(1, order[:, :count], True)
        out.append((tokens.masked_fill(masked, 0), masked))
    return out


def test_refresh_rewrites_the_cache_in_place_with_no_padding(pipe: DiMOOPipeline) -> None:
    cache = MLCacheConfig(cache_ratio=0.75, warmup_ratio=0.0, refresh_interval=2)
    den = pipe.make_denoiser(PROMPTS, None, width=16, height=12, cfg=2.0, cache=cache, steps=8)
    ptrs = []
    for tokens, masked in _states(8, 12, seed=5):
        den(tokens, masked)
        ptrs.append([t.data_ptr() for i in range(2) for pair in den.item(i).kv for t in pair]
                    + [den.item(i).logits.data_ptr() for i in range(2)])
    assert den.stats.refresh_at == [0, 2, 4, 6] and den.stats.cached_steps == 4
    assert all(p == ptrs[0] for p in ptrs)  # every refresh wrote into the first buffers
    kept = [den.item(i).kv[0][0].shape[0] for i in range(2)]  # each item: its two rows' tokens
    assert sum(kept) == den.real_tokens < den.attention_mask.numel()  # no padding
    assert all(den.item(i).kv[0][1].shape[0] == kept[i] for i in range(2))


def _peak(pipe: DiMOOPipeline, cache: MLCacheConfig | None) -> tuple[int, int]:
    den = pipe.make_denoiser(PROMPTS[0], None, width=16, height=16, cfg=2.0, cache=cache, steps=8)
    with LiveBytes() as mem:
        sample(den, shape=(1, 4, 4), steps=8, strategy="baseline",
               generator=torch.Generator().manual_seed(0))
    return mem.peak, den.caches.nbytes() if den.caches is not None else 0


def test_cache_costs_only_the_bytes_it_keeps(pipe: DiMOOPipeline) -> None:
    """Peak extra memory of a cached run (refresh every other call) over a plain run is the
    cache itself (K/V + code-slot logits + index): no second copy during refreshes."""
    plain, _ = _peak(pipe, None)
    cached, kept = _peak(pipe, MLCacheConfig(warmup_ratio=0.0, refresh_interval=2))
    assert kept > 0
    assert cached - plain <= 1.02 * kept, (cached - plain, kept)
    assert cached - plain >= 0.9 * kept  # the measurement sees the cache at all


def test_packed_passes_equal_the_unpadded_rows_and_the_padded_cache_path() -> None:
    """full_pass == each row alone (fp32, <= 1e-5); partial_pass after changing tokens == the
    padded ``hidden_states_partial`` (the official ``to_compute_mask`` path, golden-tested)."""
    from ladr_core.dimoo.model.config import LLaDAConfig
    from ladr_core.dimoo.model.packed import full_pass, partial_pass
    from ladr_core.dimoo.model.transformer import LLaDAModel

    torch.manual_seed(0)
    model = LLaDAModel(LLaDAConfig(d_model=32, n_heads=4, n_kv_heads=2, n_layers=2,
                                   mlp_hidden_size=48, vocab_size=96, max_sequence_length=64)).eval()
    lengths = [9, 9, 6]
    rows = [torch.randint(0, 96, (n,)) for n in lengths]
    packed = PackedRows.from_lengths(lengths)
    ids = torch.cat(rows)
    layers: list = []
    with torch.no_grad():
        hidden = full_pass(model, ids, packed, lambda i, k, v: layers.append((k, v)))
        for r, row in enumerate(rows):
            alone, _ = model.hidden_states(row[None])
            start = int(packed.starts[r])
            torch.testing.assert_close(hidden[start: start + len(row)], alone[0], atol=1e-5, rtol=1e-5)
        # padded reference: left padding + key mask, the path the cache used before packing
        width = max(lengths)
        pad = torch.zeros(3, width, dtype=torch.long)
        mask = torch.zeros(3, width, dtype=torch.long)
        for r, row in enumerate(rows):
            pad[r, width - len(row):], mask[r, width - len(row):] = row, 1
        _, kv_pad = model.hidden_states(pad, mask, return_kv=True)
        slots = torch.tensor([[1, 5], [0, 8], [2, 3]])  # row-local positions to recompute
        new_pad = pad.clone()
        for r in range(3):
            for c in slots[r]:
                new_pad[r, width - lengths[r] + c] = 7
        # each row's own cache: the full pass's K/V split by row (copies: updated in place)
        kv = [[(k.split(lengths)[r].clone(), v.split(lengths)[r].clone()) for k, v in layers]
              for r in range(3)]
        got = partial_pass(model, torch.full((6,), 7), slots.reshape(-1), [2, 2, 2], kv)
        ref = model.hidden_states_partial(new_pad, slots + (width - torch.tensor(lengths))[:, None],
                                          kv_pad, mask)
    torch.testing.assert_close(got.view(3, 2, -1), ref, atol=1e-5, rtol=1e-5)


def test_baseline_with_the_official_cache_refreshes_on_the_official_calls(pipe: DiMOOPipeline) -> None:
    den = pipe.make_denoiser(PROMPTS, None, width=32, height=32, cfg=2.0, cache=MLCacheConfig(),
                             steps=64)
    res = sample(den, shape=(2, 8, 8), steps=64, strategy="baseline",
                 generator=[torch.Generator().manual_seed(i) for i in range(2)])
    assert res.nfe == 64 and den.stats.cached_steps == 64 - 28
    assert den.stats.refresh_at == [s for s in range(64) if MLCacheConfig().is_refresh(s, 64)]


def test_recompute_changed_takes_committed_slots_first(pipe: DiMOOPipeline) -> None:
    """With recompute_changed, slots whose token changed since their K/V were made (committed
    tokens, whose cached K/V still encode the mask) are recomputed before low max logits."""
    cache = MLCacheConfig(cache_ratio=0.75, warmup_ratio=0.0, refresh_interval=99,
                          refresh_commit=0.0, recompute_changed=True)
    den = pipe.make_denoiser(PROMPTS, None, width=16, height=12, cfg=2.0, cache=cache, steps=8)
    tokens = torch.zeros(2, 12, dtype=torch.long)
    masked = torch.ones(2, 12, dtype=torch.bool)
    den(tokens, masked)  # refresh
    confident = []
    for i in range(2):  # each item's (cond, uncond) rows: their two most confident slots
        top = den.item(i).max_logit.argsort(dim=1, descending=True)[:, :2]  # never picked
        assert not (den.item(i).next_index[..., None] == top[:, None]).any()
        confident.append(top[0])
    item = torch.stack(confident)  # item i commits its cond row's two most confident slots
    masked2 = masked.clone().scatter_(1, item, False)
    tokens2 = tokens.clone().scatter_(1, item, 5)
    den(tokens2, masked2)  # cached call
    assert den.stats.cached_steps == 1
    for i in range(2):
        chosen = den.item(i).codes  # the cache now holds the committed ids at those slots
        assert chosen.shape == (2, den.code_pos.shape[1])
        for row in (0, 1):  # its cond row; its uncond row changed too
            assert (chosen[row, item[i]] == pipe.ids.image_offset + 5).all()


class _Recorder:
    """A forward hook running the eager passes and recording the recomputed positions."""

    compile_seconds = 0.0

    def __init__(self) -> None:
        self.partial_index: list[list[torch.Tensor]] = []

    def full(self, model, *args):  # noqa: ANN001, ANN201
        from ladr_core.dimoo.model.packed import full_pass

        return full_pass(model, *args)

    def partial(self, model, ids, positions, counts, kv):  # noqa: ANN001, ANN201
        from ladr_core.dimoo.model.packed import partial_pass

        self.partial_index.append(list(positions.clone().split(counts)))  # per row, in-row
        return partial_pass(model, ids, positions, counts, kv)


def test_recompute_masked_refreshes_every_slot_the_sampler_reads(pipe: DiMOOPipeline) -> None:
    cache = MLCacheConfig(cache_ratio=0.9, warmup_ratio=0.0, refresh_interval=99,
                          refresh_commit=0.0, recompute_masked=True)
    den = pipe.make_denoiser(PROMPTS, None, width=16, height=12, cfg=2.0, cache=cache, steps=8)
    den.forward_hook = rec = _Recorder()
    states = _states(8, 12, seed=7)
    for tokens, masked in states[:4]:
        den(tokens, masked)
    assert den.stats.refresh_at == [0] and len(rec.partial_index) == 3
    for i, per_row in enumerate(rec.partial_index, start=1):
        # needed: masked now, or committed since the previous call (its K/V encode the mask)
        need = states[i - 1][1]  # masked at call i-1 = masked now | committed; per item
        for r, index in enumerate(per_row):  # rows item by item: (cond, uncond) of 0, then 1
            item, branch = divmod(r, 2)
            local = den.table.code_local[item + 2 * branch]  # the row's code slots in-row
            hit = (local[:, None] == index[None, :]).any(-1)
            assert (hit | ~need[item]).all(), (i, r)  # every needed slot was recomputed
            assert len(index) == max(int(need[item].sum()), cache.n_recompute(12))


def test_pick_rounds_the_cached_pass_size_to_buckets_for_compiled_passes() -> None:
    from ladr_core.dimoo.denoise.cache import BranchCache

    br = BranchCache(MLCacheConfig(recompute_masked=True))
    br.plan_next(torch.randn(2, 16, 8))  # n_recompute(16) = 2
    need = torch.zeros(2, 16, dtype=torch.bool)
    need[0, :5] = True
    need[1, 3:6] = True
    br.codes = torch.zeros(2, 16, dtype=torch.long)
    assert br.pick(need, 5).shape == (2, 5)  # eager: the exact size
    picked = br.pick(need, 5, bucket=4)
    assert picked.shape == (2, 8)  # compiled: rounded up to a multiple of 4
    assert need.gather(1, picked).sum(1).tolist() == [5, 3]  # every needed slot is in
    assert br.pick(need, 15, bucket=4).shape == (2, 16)  # never more than N
