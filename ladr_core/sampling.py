"""sample(): the one masked-diffusion sampling loop, its result and its step record.

Contract: docs/ARCHITECTURE.md section 1. The denoiser is a callable
`denoise(tokens LongTensor[B, N], masked BoolTensor[B, N]) -> logits FloatTensor[B, N, K]`
(CFG already applied); the loop never sees the network. Per step it calls the denoiser once,
derives what the strategy needs from the logits of the still-masked positions only, as the
official loop does (item by item on its L_i masked rows [L_i, K]: argmax or Gumbel-max, one
softmax, top-2 and a gather, in two [N, K] work buffers kept for the run), lets the strategy
pick which masked tokens to unmask and makes at most ONE host synchronisation: one transfer of
the per-item masked counts [B], which serves the early-exit check and sizes the next step's row
gathers and draws.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .adaptive import adaptive_rescue
from .noise import NoiseNeeds, StepNoise, draw_item_noise, generators_for
from .policy import LADRPolicy, ProphetPolicy
from .schedules import Schedule, get_schedule
from .strategies import (
    LADRTables,
    baseline_keep_table,
    baseline_remask,
    keep_lowest,
    ladr_keep_counts,
    ladr_rescue,
    prophet_fire,
    schedule_dtype,
)
from .validation import check_logits, validate_arguments

STRATEGIES = ("baseline", "ladr", "prophet")

# Every tensor in a record is fresh (the loop keeps no reference to it), so a callback may keep,
# move or modify it; it decides itself what to sync.
STEP_RECORD_KEYS: tuple[str, ...] = (
    "step",  # int, 0-based
    "steps",  # int T
    "strategy",  # str
    "tokens",  # LongTensor [B, N]; masked positions hold the current prediction
    "masked",  # BoolTensor [B, N] after the step
    "rescued",  # BoolTensor [B, N], unmasked by LADR's rescue this step
    "unmasked",  # BoolTensor [B, N], every position unmasked this step
    "nfe",  # int, denoise calls so far
    "t_eff",  # FloatTensor [B], gamma^-1(masked ratio) at the start of the step
    "phase",  # LongTensor [B]: 0 exploration, 1 structure, 2 refinement, -1 n/a
    "grid",  # (H, W)
)


@dataclass
class SampleResult:
    """tokens: LongTensor [B, H*W] in [0, K); nfe: denoise calls; steps: steps actually run."""

    tokens: torch.Tensor
    nfe: int
    steps: int


@dataclass
class _Prediction:
    """What one step derives from the logits; every field is [B, M] in row space (row j of item i
    = its j-th masked position) until `at_positions` maps it to [B, N]."""

    sampled: torch.Tensor  # LongTensor: Gumbel-max sample (argmax at temperature 0)
    log_conf: torch.Tensor | None  # log(p(sampled).clamp_min(1e-20)) (baseline, prophet)
    top1: torch.Tensor | None  # top-1 probability (ladr)
    margin: torch.Tensor | None  # Delta = p(1) - p(2) (ladr)
    logit_gap: torch.Tensor | None  # top-1 minus top-2 logit (prophet)
    argmax: torch.Tensor | None = None  # LongTensor: the top-1 token (ladr)

    def at_positions(self, idx: torch.Tensor | None, n: int) -> _Prediction:
        """Every field scattered to its position: [B, N] (0 where nothing is masked)."""
        return _Prediction(*(_to_positions(v, idx, n) for v in (
            self.sampled, self.log_conf, self.top1, self.margin, self.logit_gap, self.argmax)))


def _masked_first(masked: torch.Tensor, counts: list[int]) -> torch.Tensor | None:
    """Positions of each item's masked tokens first, in index order: LongTensor [B, M].

    masked: BoolTensor [B, N]; counts: its per-item sums as host ints. M = max(counts); for an
    item with L_i < M the tail holds decoded positions (padding). A stable sort keeps index
    order, the order of the official boolean-mask indexing `logits[:, vq_mask[0]]`, and needs
    no host sync. None when every position is masked (rows == positions, nothing to gather).
    """
    if min(counts) == masked.shape[1]:
        return None
    order = torch.argsort((~masked).to(torch.uint8), dim=1, stable=True)
    return order[:, : max(counts)]


def _item_rows(
    logits: torch.Tensor, idx: torch.Tensor | None, own: torch.Tensor | None
) -> torch.Tensor:
    """One item's logit rows [L, K] at positions idx [L] (all N rows when idx is None).

    own: the step's reusable [M, K] buffer, needed when rows are gathered or half-precision
    logits are upcast (once, to float32, so probabilities near tau are not rounded away); the
    denoiser's tensor is never modified.
    """
    if own is None:
        return logits
    if idx is None:
        return own.copy_(logits)
    out = own[: idx.shape[0]]
    if own.dtype == logits.dtype:
        return torch.index_select(logits, 0, idx, out=out)
    return out.copy_(logits.index_select(0, idx))


def _to_positions(
    vals: torch.Tensor | None, idx: torch.Tensor | None, n: int
) -> torch.Tensor | None:
    """Row-space values [B, M] -> [B, N] at positions idx [B, M] (0 elsewhere); None stays None."""
    if vals is None or idx is None:
        return vals
    return vals.new_zeros((vals.shape[0], n)).scatter_(1, idx, vals)


# aten's softmax with an out= buffer (same kernel as torch.softmax). It is a private name, so a
# torch build without it falls back to the allocating public call rather than failing.
_SOFTMAX_OUT = getattr(torch, "_softmax", None)


def _item_stats(
    x: torch.Tensor, strategy: str, sampled: torch.Tensor | None, buf: torch.Tensor,
    log_conf_needed: bool,
) -> _Prediction:
    """The per-token statistics the strategy needs from one item's logit rows x [L, K].

    One softmax, then top-2 on it (ladr) or on the logits (prophet) and a gather for p(sampled),
    as the official loop does on its [1, L, K] masked rows. log_conf_needed: also gather
    log p(sampled) (baseline, prophet, LADR "gumbel" selection). sampled: the Gumbel-max sample [L],
    or None for greedy (argmax of the logits, as official). buf: a float32 [L, K] buffer free
    for reuse (the consumed Gumbel noise); the softmax is written into it when x is float32
    (same bits as torch.softmax, without a fresh allocation). Fields are [L].
    """
    if sampled is None:
        sampled = x.argmax(dim=-1)
    log_conf = top1 = margin = gap = argmax = None
    if strategy == "prophet":
        top2 = x.topk(2, dim=-1).values
        gap = top2[:, 0] - top2[:, 1]
    if buf.dtype == x.dtype and _SOFTMAX_OUT is not None:
        probs = _SOFTMAX_OUT(x, -1, False, out=buf)
    else:
        probs = torch.softmax(x, dim=-1)
    if log_conf_needed:
        conf = probs.gather(-1, sampled.unsqueeze(-1)).squeeze(-1)
        log_conf = torch.log(conf.clamp_min(1e-20))
    if strategy == "ladr":
        top2 = probs.topk(2, dim=-1)
        top1, margin = top2.values[:, 0], top2.values[:, 0] - top2.values[:, 1]
        argmax = top2.indices[:, 0]
    return _Prediction(sampled, log_conf, top1, margin, gap, argmax)


def _stack_rows(parts: list[tuple[int, int, object]], b: int, m: int, fields: tuple[str, ...],
                like: torch.Tensor) -> dict[str, torch.Tensor | None]:
    """Per-item [L_i] fields -> [B, M] (0 in padding and for items with nothing masked)."""
    out: dict[str, torch.Tensor | None] = dict.fromkeys(fields)
    for i, count, part in parts:
        for name in fields:
            v = getattr(part, name)
            if v is None:
                continue
            if out[name] is None:
                out[name] = like.new_zeros((b, m), dtype=v.dtype)
            out[name][i, :count] = v
    return out


class _Run:
    """State of one sample() call: tokens / mask on the denoiser's device plus per-run tables."""

    def __init__(self, args: dict[str, Any]) -> None:
        self.__dict__.update(args)
        b, h, w = self.shape
        self.b, self.n, self.grid = b, h * w, (h, w)
        self.tokens = torch.zeros(b, self.n, dtype=torch.long, device=self.device)
        self.masked = torch.ones(b, self.n, dtype=torch.bool, device=self.device)
        self.k: int | None = None
        self.nfe = 0
        self.counts: list[int] = [self.n] * b  # masked count per item, host ints
        self.buffers: dict[str, torch.Tensor] = {}  # see workspace()

    def bind_device(self, device: torch.device) -> None:
        """After the first denoise call: move state to the logits' device and build tables."""
        self.device = device
        self.tokens = self.tokens.to(device)
        self.masked = self.masked.to(device)
        self.sched_dtype = schedule_dtype(device)
        self.keep_table = baseline_keep_table(self.n, self.steps, self.schedule, device)
        self.tables = LADRTables(self.policy, device) if self.strategy == "ladr" else None
        self.ranks_by_log_conf = self.strategy != "ladr" or self.policy.selection == "gumbel"

    def workspace(self, name: str, k: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """A [N, K] work buffer kept for the whole run (allocated on first use).

        Reusing it avoids a fresh CPU allocation of up to N x K floats every step, whose page
        faults cost about as much as a pass over it; it is released when sample() returns.
        """
        buf = self.buffers.get(name)
        if buf is None or buf.dtype != dtype or buf.device != device or buf.shape[1] != k:
            buf = self.buffers[name] = torch.empty((self.n, k), dtype=dtype, device=device)
        return buf

    def sync_counts(self) -> bool:
        """The loop's single host synchronisation per step: the per-item masked counts [B].

        They give the early exit (True while anything is masked) and size the next step's row
        gather and per-item draws, so nothing else in a step has to wait for the device.
        """
        values = torch.cat([self.masked.sum(dim=1), self.nonfinite.view(1).long()]).tolist()
        self.counts = values[:-1]
        if values[-1]:
            self.raise_nonfinite()
        return any(self.counts)

    def raise_nonfinite(self) -> None:
        raise ValueError(
            f"denoise returned non-finite logits (NaN or +inf) at step {self.nfe - 1}; check the "
            "model weights and dtype (float16 can overflow: use bfloat16 or float32) and the cfg "
            "scale"
        )

    def predict(self, logits: torch.Tensor) -> tuple[_Prediction, StepNoise]:
        """Noise and statistics of each item's masked rows, item by item, mapped to [B, N].

        Two [M, K] views of the run's workspace serve every item in turn (M = max L_i): the
        gathered rows (when anything is gathered or upcast) and the Gumbel noise, which then
        takes the softmax. Items with nothing masked are skipped (they draw nothing).
        """
        idx = _masked_first(self.masked, self.counts)
        b, _, k = logits.shape
        m = max(self.counts)
        dtype = logits.dtype if logits.dtype in (torch.float32, torch.float64) else torch.float32
        own = None
        if idx is not None or dtype != logits.dtype:
            own = self.workspace("rows", k, dtype, logits.device)[:m]
        buf = self.workspace("noise", k, torch.float32, logits.device)[:m]
        needs = NoiseNeeds.of(self)
        parts = []
        for i, (gen, count) in enumerate(zip(self.generators, self.counts, strict=True)):
            if count == 0:
                continue
            rows = _item_rows(logits[i], None if idx is None else idx[i, :count], own)
            noise = draw_item_noise(needs, gen, rows, self.temperature, buf[:count])
            stats = _item_stats(rows, self.strategy, noise.sampled, buf[:count],
                                self.ranks_by_log_conf)
            parts.append((i, count, stats, noise))
        pred = _stack_rows([(i, c, p) for i, c, p, _ in parts], b, m,
                           ("sampled", "log_conf", "top1", "margin", "logit_gap", "argmax"),
                           logits)
        noise = _stack_rows([(i, c, z) for i, c, _, z in parts], b, m, ("remask", "uniform"),
                            logits)
        if pred["sampled"] is None:  # nothing masked anywhere (the loop has stopped before)
            pred["sampled"] = logits.new_zeros((b, m), dtype=torch.long)
        pred = _Prediction(**pred).at_positions(idx, self.n)
        return pred, StepNoise(None, _to_positions(noise["remask"], idx, self.n),
                               _to_positions(noise["uniform"], idx, self.n))

    def noisy_confidence(self, pred: _Prediction, noise: StepNoise) -> torch.Tensor:
        """The baseline's ranking score [B, N]: log p(sampled) + temperature * Gumbel (no noise
        at temperature 0). Also LADR's with selection "gumbel"; "top1" ranks by top-1 instead."""
        if noise.remask is None:
            return pred.log_conf
        return pred.log_conf + self.temperature * noise.remask

    def step(self, step: int) -> dict[str, Any]:
        """One denoise call and one unmasking decision; returns the step record."""
        logits = self.denoise(self.tokens, self.masked)
        self.nfe += 1
        self.k = check_logits(logits, self.b, self.n, self.k)
        if step == 0:
            self.bind_device(logits.device)
        masked = self.masked
        remaining = masked.sum(dim=1)
        t_eff = self.schedule.gamma_inv(remaining.to(self.sched_dtype) / self.n)
        pred, noise = self.predict(logits)
        # NaN / +inf logits make the masked rows' probabilities NaN; the flag rides along with
        # the step's one host transfer (sync_counts) instead of costing a sync of its own (so
        # the last step, which has no sync, is not checked).
        stat = pred.top1 if pred.top1 is not None else pred.log_conf
        self.nonfinite = torch.isnan(stat).any()
        rescued = torch.zeros_like(masked)
        phase = torch.full_like(remaining, -1)
        if self.strategy == "ladr":
            phase = self.tables.phase(t_eff)
            n_mask = ladr_keep_counts(masked, t_eff, step, self.steps, self.schedule)
            rank = pred.top1 if self.policy.selection == "top1" else self.noisy_confidence(
                pred, noise)
            m_std = keep_lowest(rank, masked, n_mask)
            if self.policy.adaptive is None:
                rescued = ladr_rescue(
                    m_std, pred.top1, pred.margin, phase, self.tables, self.grid, noise.uniform,
                    masked,
                )
            else:
                rescued = adaptive_rescue(m_std, masked, pred.top1, pred.margin, noise.uniform,
                                          t_eff, self.steps, self.schedule, self.policy, self.grid)
            new_masked = m_std & ~rescued
        else:
            new_masked = baseline_remask(masked, self.noisy_confidence(pred, noise),
                                         self.keep_table[step])
            if self.strategy == "prophet":
                fire = prophet_fire(
                    masked, pred.logit_gap, self.prophet.threshold(step / self.steps)
                )
                new_masked = new_masked & ~fire.unsqueeze(1)
        unmasked = masked & ~new_masked
        self.tokens = torch.where(unmasked, pred.sampled, self.tokens)
        if self.strategy == "ladr" and self.policy.rescue_token == "argmax":
            self.tokens = torch.where(rescued, pred.argmax, self.tokens)
        self.masked = new_masked
        return {
            "step": step,
            "steps": self.steps,
            "strategy": self.strategy,
            "tokens": torch.where(new_masked, pred.sampled, self.tokens),
            "masked": new_masked.clone(),
            "rescued": rescued,
            "unmasked": unmasked,
            "nfe": self.nfe,
            "t_eff": t_eff.to(torch.float32),
            "phase": phase,
            "grid": self.grid,
        }


def sample(
    denoise: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    shape: Sequence[int],
    steps: int,
    strategy: str = "ladr",
    policy: LADRPolicy | None = None,
    temperature: float = 1.0,
    generator: torch.Generator | Sequence[torch.Generator] | None = None,
    callback: Callable[[dict[str, Any]], None] | None = None,
    schedule: str | Schedule = "cosine",
    prophet: ProphetPolicy | None = None,
    device: torch.device | str | None = None,
) -> SampleResult:
    """Generate B token grids of H x W with `steps` = T schedule steps (contract: ARCHITECTURE 1).

    strategy: "baseline" (official DiMOO `generate_image`), "ladr" (Algorithm 1 with `policy`,
    default LADRPolicy()), "prophet" (baseline plus Prophet early commit with `prophet`, default
    ProphetPolicy()). temperature 0 = greedy with no random draw (except a random LADR ablation).
    generator: None (device default generator), one generator shared by all items (each step,
    item 0 draws its noise, then item 1, ...), or a list of B generators (item i with g_i equals a
    B=1 run with g_i). Noise is drawn only for each item's masked rows, as official (order:
    ladr_core.noise). Noise is drawn on the generator's device and moved to the logits' device;
    use a generator on the denoiser's device to avoid the copy. device: where the first `tokens`
    passed to `denoise` live (default: the generator's device, else CPU); from then on all state
    lives on the device of the returned logits. The loop stops early once nothing is masked and
    always finishes within T steps (the last step unmasks everything).
    """
    args = validate_arguments(
        denoise,
        shape,
        steps,
        strategy,
        policy,
        temperature,
        generator,
        callback,
        schedule,
        prophet,
        device,
    )
    args["schedule"] = get_schedule(args["schedule"])
    args["generators"] = generators_for(args["generator"], args["shape"][0])
    run = _Run(args)
    steps_run = 0
    for step in range(run.steps):
        record = run.step(step)
        steps_run += 1
        if callback is not None:
            callback(record)
        # The loop's single host synchronisation: stop once nothing is masked anywhere.
        if step < run.steps - 1 and not run.sync_counts():
            break
    return SampleResult(tokens=run.tokens, nfe=run.nfe, steps=steps_run)


__all__ = ["STEP_RECORD_KEYS", "STRATEGIES", "SampleResult", "StepNoise", "sample"]
