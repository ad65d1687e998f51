"""ML-Cache (Lumina-DiMOO's "max-logit cache"): configuration, refresh schedule, per-row state.

Official semantics (``generators/image_generation_generator.py``, the caching code of
``model/modeling_llada.py``): a *refresh* step is a full forward storing every layer's K/V and
the logits per branch (cond / uncond); any other step recomputes only the code slots whose max
logit was lowest at the previous step (a fraction ``1 - cache_ratio``), their fresh K/V
overwriting the cached ones in place, and reuses the cached logits elsewhere. Differences:

* ranking: each row's image code slots by max codebook logit, recomputing the lowest
  ceil((1 - cache_ratio) * N); the official code ranks every position (text too) by a quantile.
* refresh by progress (``CacheSchedule``), not by step count (which only suits a sampler
  taking exactly T steps): a call's progress is max(call index, 1 + the first baseline call
  whose masked count <= the previous call's mean masked count). Warm-up while progress <=
  int(T * warmup_ratio); then a refresh every ``refresh_interval`` calls, and when the tokens
  committed since the last refresh reach ``refresh_commit`` * N (LADR's big rescues rewrite
  keys and values cached steps would read stale; 0.3 never fires for the baseline at T = 64).
  Under the baseline progress is the call index, so the refresh calls are the official ones
  (tested); LADR leaves warm-up when its masked ratio does.
* the counts reach the host one call late through a pinned buffer (hostlag.py): no host sync.
* packed K/V [T, Hkv, hd] per layer and the code slots' logits in the model dtype; later
  refreshes overwrite the first one's buffers in place (tested by data_ptr and bytes
  allocated). ``MLCacheConfig.ladr()`` is the preset for LADR runs (docs/reports/ML_CACHE.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ...schedules import get_schedule
from ..model.transformer import LayerKV

__all__ = ["MLCacheConfig", "BranchCache", "CacheSchedule"]


def _ratio(name: str, value: object, low: float, high: float, closed_low: bool, hint: str) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if ok:
        v = float(value)  # type: ignore[arg-type]
        ok = (low <= v if closed_low else low < v) and v < high
    if not ok:
        bracket = "[" if closed_low else "("
        raise ValueError(f"{name} must be in {bracket}{low:g}, {high:g}) (got {value!r}); {hint}")


@dataclass(frozen=True)
class MLCacheConfig:
    """ML-Cache knobs: the official ones (inference_t2i.py defaults) + ``refresh_commit``.

    ``refresh_commit``: the share of N committed since the last refresh that forces one
    (module docstring; 0: off). On a cached call ``recompute_changed`` recomputes first the
    slots whose token changed since their K/V were computed, then the lowest max logits (off:
    the official choice); ``recompute_masked`` recomputes every still-masked and changed slot
    (at least the official count, topped up by lowest max logit), so every logit the sampler
    reads is fresh, sized by the previous call's largest masked count (no sync).
    """

    cache_ratio: float = 0.9
    warmup_ratio: float = 0.3
    refresh_interval: int = 5
    refresh_commit: float = 0.3
    recompute_changed: bool = False
    recompute_masked: bool = False

    def __post_init__(self) -> None:
        _ratio("cache_ratio", self.cache_ratio, 0.0, 1.0, False,
               "0.9 reuses 90% of the image tokens on cached steps")
        _ratio("warmup_ratio", self.warmup_ratio, 0.0, 1.0, True,
               "0.3 runs the first 30% of the schedule without cache")
        if (not isinstance(self.refresh_interval, int) or isinstance(self.refresh_interval, bool)
                or self.refresh_interval < 1):
            raise ValueError(f"refresh_interval must be an int >= 1 (got {self.refresh_interval!r})")
        _ratio("refresh_commit", self.refresh_commit, 0.0, 1.0, True,
               "0.3 refreshes after 30% of the image tokens were committed; 0 turns it off")
        for name in ("recompute_changed", "recompute_masked"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be a bool (got {getattr(self, name)!r})")

    @property
    def tracks_codes(self) -> bool:
        return self.recompute_changed or self.recompute_masked

    @classmethod
    def ladr(cls) -> MLCacheConfig:
        """Preset for LADR runs (chosen on DiMOO-nano's validation prompts, measurements in
        docs/reports/ML_CACHE.md): masked and just-committed slots recomputed, no warm-up
        (it only made the second call a full pass), a refresh every 3 calls and after half of
        the image was committed since the last one."""
        return cls(warmup_ratio=0.0, refresh_interval=3, refresh_commit=0.5,
                   recompute_masked=True)

    def warmup_step(self, steps: int) -> int:
        return int(steps * self.warmup_ratio)

    def is_refresh(self, step: int, steps: int) -> bool:
        """Official rule: step <= warmup_step or (step - warmup_step) % refresh_interval == 0."""
        warm = self.warmup_step(steps)
        return step <= warm or (step - warm) % self.refresh_interval == 0

    def n_recompute(self, n_positions: int) -> int:
        """Positions recomputed per row on a cached step: ceil((1 - cache_ratio) * N), >= 1."""
        return max(1, min(n_positions, math.ceil((1.0 - self.cache_ratio) * n_positions - 1e-9)))


class CacheSchedule:
    """Refresh-or-cached decision per denoiser call, by progress (module docstring).

    ``baseline_masked[s]``: the official baseline's masked count at the start of call ``s``
    (N, then ``min(keep[s - 1], baseline_masked[s - 1] - 1)``, its keep table as
    ``baseline.baseline_keep``, one token at least per step as ``mask_by_random_topk``).
    Strictly decreasing, so the baseline's call s has progress s.
    """

    def __init__(self, config: MLCacheConfig, steps: int, n_codes: int,
                 schedule: str = "cosine") -> None:
        self.config, self.steps, self.n = config, steps, n_codes
        gamma = get_schedule(schedule).gamma
        t = torch.tensor([s / steps for s in range(1, steps)], dtype=torch.float32)
        keep = (float(n_codes) * gamma(t)).floor().clamp_min(1).tolist()
        masked = [float(n_codes)]
        for k in keep:  # the official loop unmasks at least one token per step
            masked.append(max(0.0, min(k, masked[-1] - 1)))
        self.baseline_masked: list[float] = masked
        self.calls = 0
        self.last_refresh: int | None = None  # call index of the last refresh
        self.masked_at_refresh = float(n_codes)  # mean masked count the last refresh saw

    def progress_step(self, masked_prev: float | None) -> int:
        """max(call index, 1 + first baseline step with masked count <= masked_prev): the
        previous call's progress plus the one step since (the call index at the first call)."""
        if masked_prev is None:
            return self.calls
        first = next((s for s, c in enumerate(self.baseline_masked) if c <= masked_prev),
                     self.steps)
        return max(self.calls, first + 1)

    def refresh(self, masked_prev: float | None, ready: bool) -> bool:
        """Decide the current call (then advance): True = full pass. masked_prev: the mean
        masked count the previous call saw (None: first call, or no count)."""
        cfg = self.config
        if self.last_refresh == self.calls - 1 and masked_prev is not None:
            self.masked_at_refresh = masked_prev  # the previous call was the refresh
        warm = self.progress_step(masked_prev) <= cfg.warmup_step(self.steps)
        due = self.last_refresh is None or self.calls - self.last_refresh >= cfg.refresh_interval
        big = False
        if masked_prev is not None and cfg.refresh_commit > 0:
            committed = (self.masked_at_refresh - masked_prev) / max(self.n, 1)
            big = committed >= cfg.refresh_commit
        full = warm or due or big or not ready
        if full:
            self.last_refresh = self.calls  # its count arrives with the next call
        self.calls += 1
        return full


class BranchCache:
    """One item's cache: per-layer K/V of its rows (cond, then uncond with CFG; each row's
    [L_r, Hkv, hd] a view of one packed buffer per layer), its code-slot logits [R, N, K] and
    ``next_index`` [R, M], the slots its next cached call recomputes. Each row ranks its own
    positions, as the official code; the buffers are made at the first refresh and rewritten
    in place (module docstring), and nothing else is kept (no hidden states, no padding).
    """

    def __init__(self, config: MLCacheConfig) -> None:
        self.config = config
        self.kv: LayerKV | None = None
        self.lengths: tuple[int, ...] = ()
        self.logits: torch.Tensor | None = None
        self.next_index: torch.Tensor | None = None
        self.codes: torch.Tensor | None = None  # [R, N] input ids the cached K/V were made from
        self.max_logit: torch.Tensor | None = None  # [R, N] of the last call

    @property
    def ready(self) -> bool:
        return self.kv is not None and self.logits is not None and self.next_index is not None

    def buffers(self, layers: int, lengths: tuple[int, ...], like: torch.Tensor) -> LayerKV:
        """The per-layer K/V buffers [sum(lengths), Hkv, hd] (made at the first refresh)."""
        if self.kv is None or self.lengths != lengths:
            shape = (sum(lengths), *like.shape[1:])
            self.kv = [(like.new_empty(shape), like.new_empty(shape)) for _ in range(layers)]
            self.lengths = lengths
        return self.kv

    def row_kv(self) -> list[LayerKV]:
        """Each row's per-layer (k, v) [L_r, Hkv, hd]: views of the buffers."""
        assert self.kv is not None
        out: list[LayerKV] = [[] for _ in self.lengths]
        for k, v in self.kv:
            for r, (kr, vr) in enumerate(zip(k.split(self.lengths), v.split(self.lengths),
                                             strict=True)):
                out[r].append((kr, vr))
        return out

    def store(self, logits: torch.Tensor, codes: torch.Tensor) -> None:
        """After a refresh (its K/V already in the buffers): keep the logits (in the existing
        buffer, else a contiguous one: they may be a view of the pass's rows) and the codes."""
        if self.config.tracks_codes:
            self.codes = codes.clone()
        if self.logits is not None and self.logits.shape == logits.shape:
            self.logits.copy_(logits)
        else:
            self.logits = logits.contiguous()

    def nbytes(self) -> int:
        """Bytes of the distinct storages the cache holds (K/V, logits, index, codes)."""
        seen: dict[int, int] = {}
        tensors = [t for pair in (self.kv or []) for t in pair]
        tensors += [t for t in (self.logits, self.next_index, self.codes, self.max_logit)
                    if t is not None]
        for t in tensors:
            st = t.untyped_storage()
            seen[st.data_ptr()] = st.nbytes()
        return sum(seen.values())

    def needed(self, codes: torch.Tensor, mask_id: int) -> torch.Tensor | None:
        """[R, N] slots a cached call must recompute first (changed since their K/V were made,
        plus still masked with ``recompute_masked``), or None (official choice)."""
        if not self.config.tracks_codes or self.codes is None or self.max_logit is None:
            return None
        need = codes != self.codes
        if self.config.recompute_masked:
            need |= codes == mask_id
        return need

    def pick(self, need: torch.Tensor | None, need_max: int = 0, bucket: int = 1) -> torch.Tensor:
        """Code slots [R, M] to recompute on this cached call: ``need`` first (M grows to
        ``need_max`` with ``recompute_masked``, rounded up to a multiple of ``bucket`` so a
        compiled pass sees few sizes), then the lowest max logits."""
        assert self.next_index is not None
        if need is None or self.max_logit is None:
            return self.next_index
        m = self.next_index.shape[1]
        if self.config.recompute_masked:
            m = max(m, min(need.shape[1], -(-need_max // bucket) * bucket))
        score = self.max_logit.masked_fill(need, float("-inf"))
        return score.topk(m, dim=1, largest=False).indices

    def update(self, index: torch.Tensor, fresh: torch.Tensor,
               codes: torch.Tensor | None = None) -> torch.Tensor:
        """Write recomputed logits [R, M, K] at code slots ``index`` [R, M]; return all [R, N, K]."""
        assert self.logits is not None
        self.logits.scatter_(1, index[..., None].expand(-1, -1, fresh.shape[-1]), fresh)
        if self.codes is not None and codes is not None:
            self.codes.scatter_(1, index, codes.gather(1, index))
        return self.logits

    def plan_next(self, logits: torch.Tensor) -> torch.Tensor:
        """Pick the lowest-max-logit code slots of each row for the next cached step: [R, M]
        (``logits`` [R, N, K] in the model dtype or float32)."""
        m = self.config.n_recompute(logits.shape[1])
        max_logit = logits.amax(dim=-1).float()  # the model dtype's maxima, exactly
        self.next_index = max_logit.topk(m, dim=1, largest=False).indices
        if self.config.tracks_codes:
            self.max_logit = max_logit
        return self.next_index
