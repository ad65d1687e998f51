"""The official block-wise answer loop of Lumina-DiMOO understanding, batched and packed.

Official behaviour (``generators/text_understanding_generator.generate_text_understanding`` as
``inference/inference_mmu.py`` calls it: 1,024 answer tokens, blocks of 256, 128 steps, cfg 0,
'low_confidence'): ``gen_length`` MASK tokens follow the prompt and image; blocks are decoded
left to right in ``steps // blocks`` steps each; per step one forward pass, then per position
of the current block ``x0 = argmax(logits)`` at temperature 0, else
``argmax(exp(logits) / (-log u) ** temperature)``, u ~ U[0, 1) in float64 (``add_gumbel_noise``);
confidence = ``softmax(logits in float64)[x0]`` at masked positions; the answer rule
(answer_rules.py) commits some of them (official: ``get_num_transfer_tokens``, most confident
first). After each block the official code stops once an end token (126081) is decoded; its
slice uses ``input_p_len`` and ``rows``, defined nowhere, so we follow the intent: the answer
ends with the block that decoded the end token, and the check reads the answer, not the prompt.

Adaptations that change no committed token: items run in packed passes (model/packed.py), at
most ``in_flight`` at once, a finished item making room for the next (a rolling batch; each
keeps its own block, step and noise: alone-equal in float32 on a CPU, on a GPU nearly always,
docs/ARCHITECTURE.md section 3); only each item's window (its answer up to the end of the
current block) is projected on the vocabulary (the official code projects every position and
sets the confidence past the block to -inf; an earlier block's position stays masked only
where the model sampled MASK, which the window keeps in play as the official loop does); the
noise is drawn per item from its own generator for its window [n, V] (official: [L, V] from
the global generator). Host syncs: one per block for the official stop (its ``.item()``), one
per step for rules whose count depends on the tokens (threshold, entropy, ``+stop``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ...devices import to_device
from ..model.packed import PackedRows, full_pass
from ..model.transformer import LLaDAModel
from .answer_rules import AnswerRule, transfer_counts

__all__ = ["AnswerShape", "AnswerRun", "ANSWER_RECORD_KEYS", "SAMPLE_CHUNK", "decode_answers",
           "sample_window"]

#: the keys of the record handed to ``callback`` after every pass (added, never renamed)
ANSWER_RECORD_KEYS = ("step", "nfe", "rule", "items", "block", "blocks", "tokens", "decoded",
                      "answer_length", "done", "batch", "progress")


@dataclass(frozen=True)
class AnswerShape:
    """The answer's length, its blocks and the official steps (checked by understanding.py)."""

    length: int = 1024
    block_length: int = 256
    steps: int = 128

    @property
    def blocks(self) -> int:
        return self.length // self.block_length

    @property
    def steps_per_block(self) -> int:
        return self.steps // self.blocks


@dataclass
class AnswerRun:
    """Per item its answer tokens on the model's device (the blocks it decoded; after a
    ``+stop`` answer's end token, end ids) and passes (``nfe``); ``passes``: packed passes."""

    tokens: list[torch.Tensor]
    nfe: list[int]
    passes: int = 0


@dataclass
class _Item:
    """One answer in flight: where its row lies in the packed sequence and where it stands."""

    offset: int  # first token of its row in the packed sequence
    length: int  # tokens of its row
    start: int  # first answer token inside the row (official ``code_start``)
    block: int = 0
    step: int = 0
    decoded: int = 0
    nfe: int = 0
    done: bool = False
    ended_early: bool = False  # a ``+stop`` end: what follows the end token was not decoded

    def window(self, shape: AnswerShape) -> int:
        """Rows of its window: the answer up to the end of its current block (module
        docstring)."""
        return (self.block + 1) * shape.block_length


SAMPLE_CHUNK = 256
"""Window rows whose float64 sampling runs at once: the official softmax over the 8B model's
134,656 words is 1.1 GB per 1,024 rows in float64, several times over in temporaries; row by
row the values are the same (every operation is per row), the peak a quarter."""


def sample_window(logits: torch.Tensor, temperature: float, generator: torch.Generator | None,
                  entropy: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """One item's window logits [n, V] -> (x0 [n], p(x0) float64 [n], entropy float64 [n] or
    None), sampled the official way (module docstring) with u [n, V] drawn in one draw from
    ``generator``, SAMPLE_CHUNK rows at a time."""
    u = None
    if temperature != 0:
        where = generator.device if generator is not None else logits.device
        u = torch.rand(logits.shape, generator=generator, device=where, dtype=torch.float64)
    parts = [_sample_rows(logits[lo:lo + SAMPLE_CHUNK], temperature,
                          None if u is None else u[lo:lo + SAMPLE_CHUNK], entropy)
             for lo in range(0, logits.shape[0], SAMPLE_CHUNK)]
    x0, p, ent = (list(t) for t in zip(*parts, strict=True))
    return torch.cat(x0), torch.cat(p), torch.cat(ent) if entropy else None


def _sample_rows(logits: torch.Tensor, temperature: float, u: torch.Tensor | None,
                 entropy: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """``sample_window`` on some rows, with their share of the noise ``u`` (None: greedy)."""
    wide = logits.double()
    if u is None:
        x0 = logits.argmax(dim=-1)
    else:
        x0 = (wide.exp() / (-torch.log(u.to(logits.device))) ** temperature).argmax(dim=-1)
    prob = torch.softmax(wide, dim=-1)
    p = prob.gather(-1, x0[:, None]).squeeze(-1)
    ent = -(prob * torch.log_softmax(wide, dim=-1)).sum(-1) if entropy else None
    return x0, p, ent


def decode_answers(model: LLaDAModel, rows: Sequence[Sequence[int]], starts: Sequence[int],
                   shape: AnswerShape, rule: AnswerRule, temperature: float,
                   generators: Sequence[torch.Generator | None], mask_id: int,
                   end_id: int | None, callback: Callable[[dict[str, Any]], None] | None = None,
                   in_flight: int | None = None) -> AnswerRun:
    """Decode the answers of B rows (module docstring): ``rows[i]`` item i's tokens (prompt,
    image, BOA, ``shape.length`` MASK, EOA), its answer from ``starts[i]``; ``end_id`` None: no
    stop. ``callback(record)`` after every pass (``ANSWER_RECORD_KEYS``; what it raises ends
    the run); ``in_flight`` (None: all) items per pass, the rest joining as answers finish."""
    if in_flight is not None and in_flight < 1:
        raise ValueError(f"in_flight must be >= 1 or None (got {in_flight})")
    device = model.compute_device()
    seq = to_device(torch.tensor([t for r in rows for t in r], dtype=torch.long), device)
    items, at = [], 0
    for row, start in zip(rows, starts, strict=True):
        items.append(_Item(at, len(row), int(start)))
        at += len(row)
    counts = transfer_counts(shape.block_length, shape.steps_per_block)  # every block's
    most = len(items) if in_flight is None else in_flight
    pack: tuple[list[int], PackedRows] | None = None  # the rows of the current pass
    passes = 0
    with torch.no_grad():
        while active := [i for i, it in enumerate(items) if not it.done][:most]:
            if pack is None or pack[0] != active:  # an item left (and another joined)
                pack = active, PackedRows.from_lengths([items[i].length for i in active], device)
            moving = [items[i] for i in active]
            logits = _window_logits(model, seq, items, active, pack[1], shape)
            after = _step(rule, seq, moving, logits, temperature, [generators[i] for i in active],
                          [counts[it.step] for it in moving] if rule.fixed_steps else None,
                          shape, mask_id)
            passes += 1
            _advance(moving, rule, shape, after, counts, end_id, mask_id)
            if callback is not None:
                callback(_record(passes, rule, items, active, after, shape))
    return AnswerRun(_answers(seq, items, shape, end_id, mask_id), [it.nfe for it in items], passes)


def _window_logits(model: LLaDAModel, seq: torch.Tensor, items: list[_Item], active: list[int],
                   rows: PackedRows, shape: AnswerShape) -> list[torch.Tensor]:
    """One packed pass over the active rows -> each item's window logits [n_i, V]: its answer
    from the first token to the end of its current block (only those rows are projected)."""
    if len(active) == len(items):
        ids = seq
    else:
        ids = torch.cat([seq[items[i].offset: items[i].offset + items[i].length]
                         for i in active])
    where, sizes, at = [], [], 0
    for i in active:
        it = items[i]
        n = it.window(shape)
        where.append(torch.arange(at + it.start, at + it.start + n, device=seq.device))
        sizes.append(n)
        at += it.length
        it.nfe += 1
    hidden = full_pass(model, ids, rows)
    return list(model.project(hidden[torch.cat(where)]).split(sizes))


def _step(rule: AnswerRule, seq: torch.Tensor, moving: list[_Item], logits: list[torch.Tensor],
          temperature: float, generators: list[torch.Generator | None],
          counts: list[int] | None, shape: AnswerShape, mask_id: int) -> torch.Tensor:
    """Sample, pick and commit one step in every moving item's window (written into ``seq``).
    Returns the windows after the step [A, n_max] (right-padded with -1)."""
    widest = max(it.window(shape) for it in moving)
    device = seq.device
    confidence = torch.full((len(moving), widest), float("-inf"), dtype=torch.float64,
                            device=device)
    masked = torch.zeros((len(moving), widest), dtype=torch.bool, device=device)
    x0 = torch.full((len(moving), widest), -1, dtype=torch.long, device=device)
    entropy = torch.zeros_like(confidence) if rule.needs_entropy else None
    windows = []
    for a, (it, gen) in enumerate(zip(moving, generators, strict=True)):  # each its own noise
        n = it.window(shape)
        now = seq[it.offset + it.start: it.offset + it.start + n]
        windows.append(now)
        x0[a, :n], p, ent = sample_window(logits[a], temperature, gen, rule.needs_entropy)
        masked[a, :n] = now == mask_id
        confidence[a, :n] = p.masked_fill(~masked[a, :n], float("-inf"))
        if entropy is not None:
            entropy[a, :n] = ent
    chosen = rule.pick(confidence, entropy, masked, counts)
    after = torch.full_like(x0, -1)
    for a, now in enumerate(windows):
        n = now.shape[0]
        after[a, :n] = torch.where(chosen[a, :n], x0[a, :n], now)
        now.copy_(after[a, :n])  # a view of seq
    return after


def _advance(moving: list[_Item], rule: AnswerRule, shape: AnswerShape, after: torch.Tensor,
             counts: list[int], end_id: int | None, mask_id: int) -> None:
    """Move each item of the pass on (step, block, done), reading the device only when a
    decision needs it (module docstring). A rule without fixed steps leaves a block when its
    window is decoded or after ``block_length`` steps (a model sampling MASK cannot stall)."""
    counted = rule.fixed_steps and not rule.stop  # the official count: known on the host
    for it in moving:
        it.step += 1
        if counted:
            it.decoded += counts[it.step - 1]
    if counted and not any(it.step == shape.steps_per_block for it in moving):
        return  # mid-block under the official count: nothing to read
    left = (after == mask_id).sum(dim=1)
    no = torch.zeros_like(left, dtype=torch.bool)
    has_end = no if end_id is None else (after == end_id).any(dim=1)
    complete = _complete(after, end_id, mask_id) if rule.stop else no
    facts = torch.stack([left, has_end.long(), complete.long()], dim=1).tolist()  # one sync
    for it, (n_left, ended, whole) in zip(moving, facts, strict=True):
        if not counted:
            it.decoded = (it.block + 1) * shape.block_length - n_left
        over = it.step == shape.steps_per_block if rule.fixed_steps else \
            n_left == 0 or it.step == shape.block_length
        if whole or (over and (ended or it.block + 1 == shape.blocks)):
            it.done, it.ended_early = True, bool(whole)
        elif over:
            it.block, it.step = it.block + 1, 0


def _complete(after: torch.Tensor, end_id: int | None, mask_id: int) -> torch.Tensor:
    """[A] bool: the window (the answer so far, [A, n]) holds a decoded end token with nothing
    masked before it."""
    if end_id is None:
        return torch.zeros(after.shape[0], dtype=torch.bool, device=after.device)
    is_end = after == end_id
    first = torch.where(is_end.any(dim=1), is_end.int().argmax(dim=1), after.shape[1])
    lane = torch.arange(after.shape[1], device=after.device)
    return is_end.any(dim=1) & ~((after == mask_id) & (lane < first[:, None])).any(dim=1)


def _record(passes: int, rule: AnswerRule, items: list[_Item], active: list[int],
            after: torch.Tensor, shape: AnswerShape) -> dict[str, Any]:
    """The callback's record (ANSWER_RECORD_KEYS); host values except ``tokens``: the active
    items' answers so far [A, n] on the device (right-padded with -1)."""
    total = shape.length * len(items)
    decoded = [shape.length if it.done else it.decoded for it in items]
    return {"step": passes - 1, "nfe": passes, "rule": rule.label, "items": list(active),
            "block": [items[i].block for i in active], "blocks": shape.blocks, "tokens": after,
            "decoded": decoded, "answer_length": shape.length,
            "done": sum(it.done for it in items), "batch": len(items),
            "progress": sum(decoded) / total}


def _answers(seq: torch.Tensor, items: list[_Item], shape: AnswerShape, end_id: int | None,
             mask_id: int) -> list[torch.Tensor]:
    """Each item's decoded answer: its blocks up to the one it stopped in (after a ``+stop``
    end, the masked tokens after the end token hold the end id)."""
    out = []
    for it in items:
        a = it.offset + it.start
        tokens = seq[a: a + it.window(shape)]
        if it.ended_early and end_id is not None:
            tokens = tokens.masked_fill(tokens == mask_id, end_id)
        out.append(tokens)
    return out
