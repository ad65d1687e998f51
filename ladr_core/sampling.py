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

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .graphs import StepGraph, step_graph
from .noise import StepNoise, draw_item_noise
from .schedules import Schedule
from .step import STAT_NAMES, Needs, RunInfo, Stats, StepRule, Strategy
from .validation import KnownTokens, SampleArgs, check_logits, validate_arguments

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
    "total",  # LongTensor [B], tokens each item generates (N; fewer with known tokens)
)


@dataclass
class SampleResult:
    """tokens: LongTensor [B, H*W] in [0, K); nfe: denoise calls; steps: steps actually run."""

    tokens: torch.Tensor
    nfe: int
    steps: int


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
    fields: dict[str, torch.Tensor | None], idx: torch.Tensor | None, n: int
) -> dict[str, torch.Tensor | None]:
    """Row-space values [B, M] -> [B, N] at positions idx [B, M] (0 elsewhere); None stays None.

    Fields of one dtype move together (one stack, one fill, one scatter): at B = 1 on a GPU a
    step is bound by its count of small kernels, not by their size.
    """
    if idx is None:
        return dict(fields)
    out: dict[str, torch.Tensor | None] = dict.fromkeys(fields)
    groups: dict[torch.dtype, list[str]] = {}
    for name, vals in fields.items():
        if vals is not None:
            groups.setdefault(vals.dtype, []).append(name)
    for names in groups.values():
        vals = torch.stack([fields[name] for name in names])  # [F, B, M]
        where = idx.expand(len(names), *idx.shape)
        moved = vals.new_zeros((len(names), idx.shape[0], n)).scatter_(2, where, vals)
        out.update(zip(names, moved.unbind(0), strict=True))
    return out


def top2_(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Largest and second-largest value of each row of x [L, K], and the largest's index: [L]
    each, the values of ``x.topk(2)`` (a tie for the top gives two equal values). x is
    overwritten (its maxima become -inf).

    Two max reductions and an [L]-element scatter instead of a top-k: on a GPU a top-2 over
    [4096, 8192] costs several max reductions (it was most of a LADR step's device time).
    """
    first, index = x.max(dim=-1)
    second = x.scatter_(-1, index.unsqueeze(-1), -math.inf).amax(dim=-1)
    return first, second, index


def item_stats(x: torch.Tensor, needs: Needs, sampled: torch.Tensor | None,
               buf: torch.Tensor) -> Stats:
    """The per-token statistics a strategy needs from one item's logit rows x [L, K]: [L] each.

    One softmax, then the top two of it (top1 / margin / argmax) or of the logits (logit_gap)
    and a gather for p(sampled), as the official loop does on its [1, L, K] masked rows.
    sampled: the Gumbel-max sample [L], or None for greedy (argmax of the logits, as official).
    buf: a float32 [L, K] buffer free for reuse (the consumed Gumbel noise); the softmax is
    written into it when x is float32 (torch.softmax's out=, no fresh [L, K] allocation), and
    before that, for logit_gap, a copy of x (x itself may be the denoiser's tensor).
    """
    if sampled is None:
        sampled = x.argmax(dim=-1)
    out = Stats(sampled)
    want = needs.stats
    own = buf if buf.dtype == x.dtype else None
    if "logit_gap" in want:
        first, second, _ = top2_(own.copy_(x) if own is not None else x.clone())
        out.logit_gap = first - second
    probs = torch.softmax(x, dim=-1, out=own)
    if "log_conf" in want:
        conf = probs.gather(-1, sampled.unsqueeze(-1)).squeeze(-1)
        out.log_conf = torch.log(conf.clamp_min(1e-20))
    if want & {"top1", "margin", "argmax"}:
        out.top1, second, out.argmax = top2_(probs)  # probs is ours: overwritten
        out.margin = out.top1 - second
    return out


def _stack_rows(parts: list[tuple[int, int, object]], b: int, m: int, fields: tuple[str, ...],
                like: torch.Tensor) -> dict[str, torch.Tensor | None]:
    """Per-item [L_i] fields -> [B, M] (0 in padding and for items with nothing masked)."""
    out: dict[str, torch.Tensor | None] = dict.fromkeys(fields)
    if b == 1 and len(parts) == 1 and parts[0][1] == m:  # one item fills the rows: views
        for name in fields:
            v = getattr(parts[0][2], name)
            out[name] = None if v is None else v.unsqueeze(0)
        return out
    for i, count, part in parts:
        for name in fields:
            v = getattr(part, name)
            if v is None:
                continue
            if out[name] is None:
                out[name] = like.new_zeros((b, m), dtype=v.dtype)
            out[name][i, :count] = v
    return out


@dataclass
class _Run:
    """State of one sample() call: tokens / mask on the denoiser's device, the strategy's rule
    for this run (bound at the first step, once the logits' device is known) and the work
    buffers. Every field is declared here."""

    args: SampleArgs
    needs: Needs
    n: int
    grid: tuple[int, int]
    tokens: torch.Tensor  # LongTensor [B, N]
    masked: torch.Tensor  # BoolTensor [B, N]
    counts: list[int]  # masked count per item, host ints (from the step's one sync)
    total: torch.Tensor | None = None  # [B] tokens to generate per item (None: N, no known)
    known_max: int = -1  # largest known code, checked against K at the first call
    k: int | None = None  # codebook size, fixed by the first denoise call
    nfe: int = 0
    rule: StepRule | None = None
    graph: StepGraph | None = None  # the rule as a CUDA graph for the middle steps (graphs.py)
    nonfinite: torch.Tensor | None = None  # bool scalar: NaN statistics this step
    item_step: torch.Tensor | None = None  # LongTensor [B]: each item's own step, on the device
    buffers: dict[str, torch.Tensor] = field(default_factory=dict)  # see workspace()

    @classmethod
    def start(cls, args: SampleArgs) -> _Run:
        """Algorithm 1 lines 1-2: everything masked, or the known tokens unmasked and the rest
        masked (`args.known`; one host transfer: the per-item counts and the known codes'
        range, which must be >= 0 here and < K at the first call)."""
        b, h, w = args.shape
        n = h * w
        if args.known is None:
            return cls(args, args.strategy.needs(), n, (h, w),
                       torch.zeros(b, n, dtype=torch.long, device=args.device),
                       torch.ones(b, n, dtype=torch.bool, device=args.device), [n] * b)
        masked = args.known.generate.to(args.device).clone()
        tokens = args.known.tokens.to(args.device, torch.long).masked_fill(masked, 0)
        total = masked.sum(dim=1)
        values = torch.cat([total, tokens.amin().view(1), tokens.amax().view(1)]).tolist()
        if values[-2] < 0:
            raise ValueError(f"known.tokens must be codes >= 0 at the known positions; got "
                             f"{values[-2]}")
        return cls(args, args.strategy.needs(), n, (h, w), tokens, masked, values[:-2], total,
                   values[-1])

    def bind_device(self, device: torch.device) -> None:
        """After the first denoise call: move state to the logits' device, bind the strategy."""
        if self.known_max >= (self.k or 0):
            raise ValueError(f"known.tokens hold code {self.known_max} but the denoiser's "
                             f"logits have K={self.k} classes: known codes must be in [0, K)")
        self.tokens = self.tokens.to(device)
        self.masked = self.masked.to(device)
        self.total = None if self.total is None else self.total.to(device)
        a = self.args
        self.rule = a.strategy.begin(RunInfo(self.n, self.grid, a.steps, a.schedule,
                                             a.temperature, device, self.total))
        self.graph = step_graph(self.rule, device, a.strategy.step_invariant, a.cuda_graph)
        self.item_step = torch.zeros(self.tokens.shape[0], dtype=torch.long, device=device)

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

    def predict(self, logits: torch.Tensor) -> tuple[Stats, StepNoise]:
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
        a = self.args
        stats, noises = [], []
        for i, (gen, count) in enumerate(zip(a.generators, self.counts, strict=True)):
            if count == 0:
                continue
            rows = _item_rows(logits[i], None if idx is None else idx[i, :count], own)
            noise = draw_item_noise(gen, rows, a.temperature, buf[:count], self.needs.remask,
                                    self.needs.uniform)
            stats.append((i, count, item_stats(rows, self.needs, noise.sampled, buf[:count])))
            noises.append((i, count, noise))
        names = ("sampled", *STAT_NAMES)
        pred = _stack_rows(stats, b, m, names, logits)
        if pred["sampled"] is None:  # nothing masked anywhere (the loop has stopped before)
            pred["sampled"] = logits.new_zeros((b, m), dtype=torch.long)
        noise = _stack_rows(noises, b, m, ("remask", "uniform"), logits)
        moved = _to_positions({**pred, **noise}, idx, self.n)
        return (Stats(**{f: moved[f] for f in names}),
                StepNoise(None, moved["remask"], moved["uniform"]))

    def step(self, step: int, record: bool = True) -> dict[str, Any] | None:
        """One denoise call and one unmasking decision by the strategy; returns the record
        (None with record=False: with no callback its tensors would be built for nothing)."""
        a = self.args
        logits = a.denoise(self.tokens, self.masked)
        self.nfe += 1
        self.k = check_logits(logits, a.shape[0], self.n, self.k)
        if step == 0:
            self.bind_device(logits.device)
        masked = self.masked
        stats, noise = self.predict(logits)
        # NaN / +inf logits make the masked rows' probabilities NaN; the flag rides along with
        # the step's one host transfer (sync_counts) instead of costing a sync of its own (so
        # the last step, which has no sync, is not checked).
        probe = next((v for v in (stats.top1, stats.log_conf, stats.margin, stats.logit_gap)
                      if v is not None), logits)  # a rule that reads no statistics: the logits
        self.nonfinite = torch.isnan(probe).any()
        middle = self.graph is not None and 0 < step < a.steps - 1
        commit = (self.graph if middle else self.rule)(self.item_step, masked, stats, noise)
        self.item_step.add_(1)  # in place: a captured graph reads this very tensor
        unmasked = masked & ~commit.masked
        self.tokens = torch.where(unmasked, commit.tokens, self.tokens)
        self.masked = commit.masked
        if not record:
            return None
        return {
            "step": step,
            "steps": a.steps,
            "strategy": a.strategy.name,
            "tokens": torch.where(commit.masked, stats.sampled, self.tokens),
            "masked": commit.masked.clone(),
            "rescued": commit.rescued,
            "unmasked": unmasked,
            "nfe": self.nfe,
            "t_eff": commit.t_eff.to(torch.float32),
            "phase": commit.phase,
            "grid": self.grid,
            "total": (torch.full_like(commit.phase, self.n) if self.total is None
                      else self.total.clone()),
        }


def sample(
    denoise: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    shape: Sequence[int],
    steps: int | None = None,
    strategy: str | Strategy = "ladr",
    temperature: float = 1.0,
    generator: torch.Generator | Sequence[torch.Generator] | None = None,
    callback: Callable[[dict[str, Any]], None] | None = None,
    schedule: str | Schedule = "cosine",
    device: torch.device | str | None = None,
    cuda_graph: bool = True,
    known: KnownTokens | None = None,
) -> SampleResult:
    """Generate B token grids of H x W (contract: docs/ARCHITECTURE.md section 1).

    strategy: a Strategy object (`Baseline()`, `LADR(policy)`, `LADR.preset("nano")`,
    `Prophet(policy)`: it carries its own policy), a registered strategy name ("baseline",
    "ladr", "prophet": their defaults) or an LADR preset name; resolved once, here
    (ladr_core.registry). steps: the schedule length T (None: the strategy's own T, else 64).
    temperature 0 = greedy with no random draw (except a random LADR ablation). generator: None
    (device default generator), one generator shared by all items (each step, item 0 draws its
    noise, then item 1, ...), or a list of B generators (item i with g_i equals a B=1 run with
    g_i). Noise is drawn only for each item's masked rows, as official (order:
    ladr_core.noise), on the generator's device, then moved to the logits' device; use a
    generator on the denoiser's device to avoid the copy. device: where the first `tokens`
    passed to `denoise` live (default: the generator's device, else CPU); from then on all state
    lives on the device of the returned logits. cuda_graph: replay a step-invariant rule as one
    CUDA graph on a CUDA device (ladr_core.graphs; False runs it eagerly, same results). The
    loop stops early once nothing is masked and always finishes within T steps (the last step
    unmasks everything). known: the starting state for inpainting / outpainting (KnownTokens:
    known codes and the positions to generate); known positions are never changed, and every
    schedule runs over each item's count to generate (N_total), as the official painting mode's
    does. With nothing to generate the loop makes no call (steps = nfe = 0).
    """
    args = validate_arguments(denoise, shape, steps, strategy, temperature, generator,
                              callback, schedule, device, cuda_graph, known)
    run = _Run.start(args)
    if not any(run.counts):  # the official loop's `break` before its first forward
        return SampleResult(tokens=run.tokens, nfe=0, steps=0)
    steps_run = 0
    # Algorithm 1 lines 3-6: at most T steps, and `break` once nothing is masked anywhere.
    for step in range(args.steps):
        record = run.step(step, record=callback is not None)
        steps_run += 1
        if callback is not None:
            callback(record)
        # The loop's single host synchronisation: stop once nothing is masked anywhere.
        if step < args.steps - 1 and not run.sync_counts():
            break
    return SampleResult(tokens=run.tokens, nfe=run.nfe, steps=steps_run)


__all__ = ["STEP_RECORD_KEYS", "KnownTokens", "SampleResult", "StepNoise", "sample"]
