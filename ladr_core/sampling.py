"""sample(): the one masked-diffusion sampling loop, its result and its step record.

What the loop computes per step: docs/SAMPLING.md, "Randomness". The denoiser is a callable
`denoise(tokens LongTensor[B, N], masked BoolTensor[B, N]) -> logits FloatTensor[B, N, K]`
(N = H*W, row-major; CFG already applied; masked positions of `tokens` hold 0); the loop never
sees the network. K comes from the first call; every call's shape is checked.

Host synchronisation: at most one per step, the transfer of the per-item masked counts [B]
(early exit; it sizes the next step's gather and draws). No host data is copied to the device
inside sample() (per-phase tau / alpha enter kernels as Python scalars, the baseline keep
table is built on the device). The step record (STEP_RECORD_KEYS: keys are added, never
renamed) is built only for a callback, its tensors on the denoiser's device.

Every item runs its own schedule (a step counter LongTensor [B] handed to the rule) and draws
from its own generator (noise.py); a denoiser that accepts `items=` is sent only the items still
running, and `max_batch` < B rolls the batch (slots.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .devices import index, to_device
from .graphs import StepGraph, step_graph
from .noise import StepNoise, draw_item_noise
from .registry import DEFAULT_STRATEGY
from .schedules import Schedule, StepSchedule
from .slots import Slots
from .stats import item_rows, item_stats, masked_first, stack_rows, to_positions
from .step import STAT_NAMES, Needs, RunInfo, Stats, StepRule, Strategy
from .validation import KnownTokens, SampleArgs, check_logits, validate_arguments

# Every tensor in a record is fresh (the loop keeps no reference to it), so a callback may keep,
# move or modify it; it decides itself what to sync.
STEP_RECORD_KEYS: tuple[str, ...] = (
    "step",  # int, 0-based
    "steps",  # int T (at a late start, T - s0: the steps this run plans)
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
    "items",  # list[int] [B]: the item each slot runs (-1 = free); slot i = item i unless rolling
    "item_step",  # LongTensor [B]: each slot's own step in the schedule (from s0 if late)
    "done",  # int, items finished before this step
    "batch",  # int, items in the whole run (more than the slots in a rolling batch)
)
# In a rolling batch (max_batch < B) the [B, ...] fields above are per slot: [max_batch, ...].


@dataclass
class SampleResult:
    """tokens: LongTensor [B, H*W] in [0, K), in item order; nfe: denoise calls; steps: loop
    steps run; item_nfe: the denoise calls each item took part in (its own steps)."""

    tokens: torch.Tensor
    nfe: int
    steps: int
    item_nfe: list[int] = field(default_factory=list)


@dataclass
class SampleRun:
    """State of one sample() call: the slots' tokens / masks on the denoiser's device, which item
    each slot runs (`slots`, host side), the strategy's rule for this run (bound at the first
    step, once the logits' device is known) and the work buffers. Every field is declared here.
    """

    args: SampleArgs
    needs: Needs
    n: int
    grid: tuple[int, int]
    tokens: torch.Tensor  # LongTensor [S, N]
    masked: torch.Tensor  # BoolTensor [S, N]
    slots: Slots
    total: torch.Tensor | None = None  # [S] tokens each slot's schedule counts over (None: N)
    generated: torch.Tensor | None = None  # [S] masked at the start, when fewer than `total`
    out: torch.Tensor | None = None  # [B, N] finished items' tokens (rolling batches only)
    known_max: int = -1  # largest known code, checked against K at the first call
    k: int | None = None  # codebook size, fixed by the first denoise call
    nfe: int = 0
    rule: StepRule | None = None
    graph: StepGraph | None = None  # the rule as a CUDA graph after the first step (graphs.py)
    nonfinite: torch.Tensor | None = None  # bool scalar: NaN statistics this step
    item_step: torch.Tensor | None = None  # LongTensor [S]: each slot's own step, on the device
    buffers: dict[str, torch.Tensor] = field(default_factory=dict)  # see workspace()

    @classmethod
    def start(cls, args: SampleArgs) -> SampleRun:
        """Algorithm 1 lines 1-2 for the first S items: everything masked, or the known tokens
        unmasked and the rest masked (`args.known`; one host transfer: every item's count and
        the known codes' range, which must be >= 0 here and < K at the first call)."""
        b, h, w = args.shape
        n, width = h * w, args.max_batch
        tokens = torch.zeros(width, n, dtype=torch.long, device=args.device)
        masked = torch.ones(width, n, dtype=torch.bool, device=args.device)
        rolling = width < b
        out = torch.zeros(b, n, dtype=torch.long, device=args.device) if rolling else None
        if args.known is None:
            return cls(args, args.strategy.needs(), n, (h, w), tokens, masked,
                       Slots.start([n] * b, width), out=out)
        generate = to_device(args.known.generate, args.device)
        known = to_device(args.known.tokens, args.device).long().masked_fill(generate, 0)
        counts = generate.sum(dim=1)
        region = args.known.region  # a late start: the schedule counts over the whole region
        totals = counts if region is None else to_device(region, args.device).sum(dim=1)
        values = torch.cat([counts, known.amin().view(1), known.amax().view(1)]).tolist()
        if values[-2] < 0:
            raise ValueError(f"known.tokens must be codes >= 0 at the known positions; got "
                             f"{values[-2]}")
        run = cls(args, args.strategy.needs(), n, (h, w), known[:width].clone(),
                  generate[:width].clone(), Slots.start(values[:-2], width),
                  totals[:width].clone(), None if region is None else counts[:width].clone(),
                  out, values[-1])
        run.buffers.update(known=known, generate=generate, totals=totals, counts=counts)
        return run

    def bind_device(self, device: torch.device) -> None:
        """After the first denoise call: move state to the logits' device, bind the strategy."""
        if self.known_max >= (self.k or 0):
            raise ValueError(f"known.tokens hold code {self.known_max} but the denoiser's "
                             f"logits have K={self.k} classes: known codes must be in [0, K)")
        for name in ("tokens", "masked", "total", "generated", "out"):
            value = getattr(self, name)
            setattr(self, name, None if value is None else value.to(device))
        for name in ("known", "generate", "totals", "counts"):
            if name in self.buffers:
                self.buffers[name] = self.buffers[name].to(device)
        a = self.args
        item = index(self.slots.item, device) if self.slots.rolling else None
        self.buffers["item"] = item  # type: ignore[assignment]
        self.rule = a.strategy.begin(RunInfo(self.n, self.grid, a.plan.steps, a.schedule,
                                             a.temperature, device, self.total, item))
        self.graph = step_graph(self.rule, device, a.strategy.step_invariant, a.cuda_graph)
        self.item_step = torch.full((self.tokens.shape[0],), a.plan.start, dtype=torch.long,
                                    device=device)

    def turnover(self) -> None:
        """Finished items leave their slots (their tokens kept in `out` in a rolling batch) and
        waiting items take them at their own first step (the schedule's start). Every write is in place, so the rule's
        RunInfo and a captured graph see it; no host sync."""
        for slot, done, joining in self.slots.turnover():
            if self.out is not None:
                self.out[done].copy_(self.tokens[slot])
            if joining is None:
                continue
            if "known" in self.buffers:
                self.tokens[slot].copy_(self.buffers["known"][joining])
                self.masked[slot].copy_(self.buffers["generate"][joining])
                self.total[slot].copy_(self.buffers["totals"][joining])  # type: ignore[index]
                if self.generated is not None:
                    self.generated[slot].copy_(self.buffers["counts"][joining])
            else:
                self.tokens[slot].zero_()
                self.masked[slot].fill_(True)
            if self.item_step is not None:
                self.item_step[slot].fill_(self.args.plan.start)
            if self.buffers.get("item") is not None:
                self.buffers["item"][slot].fill_(joining)

    def workspace(self, name: str, k: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """A [N, K] work buffer kept for the run: a fresh N x K allocation every step costs
        about as much in page faults as a pass over it."""
        buf = self.buffers.get(name)
        if buf is None or buf.dtype != dtype or buf.device != device or buf.shape[1] != k:
            buf = self.buffers[name] = torch.empty((self.n, k), dtype=dtype, device=device)
        return buf

    def sync_counts(self) -> bool:
        """The loop's one host sync per step, the masked counts [S] (module docstring): exit,
        `turnover`, the next step's sizes. True while any item is left to run."""
        values = torch.cat([self.masked.sum(dim=1), self.nonfinite.view(1).long()]).tolist()
        self.slots.counts = values[:-1]
        if values[-1]:
            self.raise_nonfinite()
        plan = self.args.plan
        stuck = [self.slots.item[s] for s in self.slots.active() if self.slots.ran[s] >= plan.left]
        if stuck:
            raise RuntimeError(f"strategy {self.args.strategy.name!r} left tokens masked after "
                               f"its last step (T={plan.steps}) for item(s) {stuck}; a "
                               "strategy must unmask everything on an item's step T - 1")
        self.turnover()
        return bool(self.slots.active())

    def raise_nonfinite(self) -> None:
        raise ValueError(
            f"denoise returned non-finite logits (NaN or +inf) at step {self.nfe - 1}; check the "
            "model weights and dtype (float16 can overflow: use bfloat16 or float32) and the cfg "
            "scale"
        )

    def predict(self, logits: torch.Tensor, rows: list[int] | None) -> tuple[Stats, StepNoise]:
        """Noise and statistics of each running item's masked rows, mapped to [S, N] (zeros
        where nothing is masked). logits: [S, N, K], or [A, N, K] for the running slots with
        rows[s] = slot s's row. Two [M, K] workspace views (M = max L_i) serve every item in
        turn: the gathered or upcast rows, and the Gumbel noise, which then takes the softmax.
        """
        counts = self.slots.counts
        idx = masked_first(self.masked, counts)
        s_count, k = len(counts), logits.shape[-1]
        m = max(counts)
        dtype = logits.dtype if logits.dtype in (torch.float32, torch.float64) else torch.float32
        own = None
        if idx is not None or dtype != logits.dtype:
            own = self.workspace("rows", k, dtype, logits.device)[:m]
        buf = self.workspace("noise", k, torch.float32, logits.device)[:m]
        a = self.args
        stats, noises = [], []
        for slot in self.slots.active():
            count, gen = counts[slot], a.generators[self.slots.item[slot]]
            x = logits[slot if rows is None else rows[slot]]
            x = item_rows(x, None if idx is None else idx[slot, :count], own)
            noise = draw_item_noise(gen, x, a.temperature, buf[:count], self.needs.remask,
                                    self.needs.uniform)
            stats.append((slot, count, item_stats(x, self.needs, noise.sampled, buf[:count])))
            noises.append((slot, count, noise))
        names = ("sampled", *STAT_NAMES)
        pred = stack_rows(stats, s_count, m, names, logits)
        if pred["sampled"] is None:  # nothing masked anywhere (the loop has stopped before)
            pred["sampled"] = logits.new_zeros((s_count, m), dtype=torch.long)
        noise = stack_rows(noises, s_count, m, ("remask", "uniform"), logits)
        moved = to_positions({**pred, **noise}, idx, self.n)
        return (Stats(**{f: moved[f] for f in names}),
                StepNoise(None, moved["remask"], moved["uniform"]))

    def call_denoiser(self, active: list[int]) -> tuple[torch.Tensor, list[int] | None]:
        """One denoise call: every slot (a denoiser without `items`, or all slots running in a
        plain batch), else only the running slots with their items' indices. Returns the
        logits and the row of each slot (None: row = slot)."""
        a = self.args
        width = self.tokens.shape[0]
        if not a.takes_items:
            return a.denoiser(self.tokens, self.masked), None
        if len(active) == width and not self.slots.rolling:
            return a.denoiser(self.tokens, self.masked, items=None), None
        idx = index(active, self.tokens.device)
        logits = a.denoiser(self.tokens.index_select(0, idx), self.masked.index_select(0, idx),
                           items=[self.slots.item[s] for s in active])
        rows = [0] * width
        for r, slot in enumerate(active):
            rows[slot] = r
        return logits, rows

    def step(self, step: int, record: bool = True) -> dict[str, Any] | None:
        """One denoise call and one unmasking decision by the strategy; returns the record
        (None with record=False: with no callback its tensors would be built for nothing)."""
        a = self.args
        active = self.slots.active()
        logits, rows = self.call_denoiser(active)
        self.nfe += 1
        self.k = check_logits(logits, self.tokens.shape[0] if rows is None else len(active),
                              self.n, self.k)
        if step == 0:
            self.bind_device(logits.device)
        masked = self.masked
        stats, noise = self.predict(logits, rows)
        # NaN / +inf logits make the statistics NaN; the flag rides along with the step's one
        # host transfer (sync_counts), so the last step, which has no sync, is not checked.
        probe = next((v for v in (stats.top1, stats.log_conf, stats.margin, stats.logit_gap,
                                  stats.entropy) if v is not None), logits)
        self.nonfinite = torch.isnan(probe).any()
        item_step = self.item_step.clone() if record else None
        commit = (self.graph if self.graph is not None and step > 0 else self.rule)(
            self.item_step, masked, stats, noise)
        self.item_step.add_(1)  # in place: a captured graph reads this very tensor
        self.slots.stepped(active)
        unmasked = masked & ~commit.masked
        self.tokens = torch.where(unmasked, commit.tokens, self.tokens)
        self.masked = commit.masked
        if not record:
            return None
        return {
            "step": step,
            "steps": a.plan.left,
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
                      else (self.total if self.generated is None else self.generated).clone()),
            "items": list(self.slots.item),
            "item_step": item_step,
            "done": self.slots.done,
            "batch": len(self.slots.item_counts),
        }


def sample(
    denoise: Callable[..., torch.Tensor],
    shape: Sequence[int],
    steps: int | StepSchedule | None = None,
    strategy: str | Strategy = DEFAULT_STRATEGY,
    temperature: float = 1.0,
    generator: torch.Generator | Sequence[torch.Generator] | None = None,
    callback: Callable[[dict[str, Any]], None] | None = None,
    schedule: str | Schedule = "cosine",
    device: torch.device | str | None = None,
    cuda_graph: bool = True,
    known: KnownTokens | None = None,
    max_batch: int | None = None,
) -> SampleResult:
    """Generate B token grids of H x W (module docstring; noise.py for `generator`,
    validation.py for `known` and `device`). strategy: a Strategy, a registered strategy or
    LADR preset name, resolved once, here (ladr_core.registry); steps: T (None: DiMOO's 64) or
    a StepSchedule (a late start for a denoise strength < 1 needs `known`). Item i's tokens
    equal its own B = 1 run whatever the batch, `known` or `max_batch`, when its logits do not
    depend on the batch (float32 on a CPU; a GPU nearly always: docs/ARCHITECTURE.md section 3).
    """
    args = validate_arguments(denoise, shape, steps, strategy, temperature, generator,
                              callback, schedule, device, cuda_graph, known, max_batch)
    run = SampleRun.start(args)
    run.turnover()  # items with nothing to generate finish before any call
    step = 0
    # Algorithm 1 lines 3-6, per item: at most T of its steps, and `break` once nothing is
    # masked; the loop runs while any item is running or waiting.
    while run.slots.active():
        record = run.step(step, record=callback is not None)
        step += 1
        if callback is not None:
            callback(record)
        if run.slots.last_step(args.plan.left):  # everyone's last step: no count to read
            break
        if not run.sync_counts():  # the loop's single host synchronisation per step
            break
    tokens = run.tokens if run.out is None else run.out
    if run.out is not None and run.slots.active():  # items that ended without a final read
        run.slots.counts = [0] * len(run.slots.counts)
        run.turnover()
    return SampleResult(tokens=tokens, nfe=run.nfe, steps=step,
                        item_nfe=list(run.slots.item_nfe))


__all__ = ["STEP_RECORD_KEYS", "KnownTokens", "SampleResult", "StepNoise", "sample"]
