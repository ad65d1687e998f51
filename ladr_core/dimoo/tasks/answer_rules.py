"""Which masked answer tokens one text-decoding step commits: the answer rules, by name.

The image strategies' registry (ladr_core.registry) for ``DiMOOPipeline.understand``: a rule is
a frozen object, a name becomes one only in ``resolve_answer_rule``, a class joins with
``@answer_rule``. A rule sees only the current block of the answer (answering.py): per item
its masked positions, each sampled token's confidence and, when asked, entropy, all
[A, block_length]:

* ``official`` (``generate_text_understanding``, 'low_confidence'): a fixed number of steps per
  block, ``transfer_counts`` tokens per step (``get_num_transfer_tokens``), most confident first.
* ``threshold`` (Fast-dLLM): every masked token with confidence >= ``tau`` (0.9), at least the
  most confident; the block ends when decoded (at most ``block_length`` steps).
* ``entropy`` (EB-Sampler): the lowest-entropy masked tokens while their summed entropy stays
  <= ``gamma`` (the image rule's ``entropy_pick``), at least one.

With ``stop=True`` (suffix ``+stop``) a rule also ends the answer once the end-of-answer token
and every answer token before it are decoded (what follows the end is not text); the official
block stop applies to every rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import torch

from ...devices import index
from ...errors import InputError
from ...step import check_number
from ...strategies.entropy import entropy_pick
from ...strategies.threshold import threshold_pick

__all__ = ["AnswerRule", "OfficialOrder", "ConfidenceThreshold", "AnswerEntropyBound", "STOP_SUFFIX",
           "answer_rule", "answer_rule_classes", "answer_rule_names", "resolve_answer_rule",
           "transfer_counts", "unregister_answer_rule"]

STOP_SUFFIX = "+stop"
_RULES: dict[str, type[AnswerRule]] = {}


def answer_rule(cls: type[AnswerRule]) -> type[AnswerRule]:
    """Class decorator: register an AnswerRule under its ``name``, as ``register_strategy``
    does a strategy (selectable everywhere, no other edit; a taken name is refused)."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name or name.endswith(STOP_SUFFIX):
        raise ValueError(f"{cls.__name__}: a registered answer rule needs a non-empty class "
                         f"attribute `name` not ending in {STOP_SUFFIX!r}")
    held = _RULES.get(name)
    if held is not None and held.__qualname__ != cls.__qualname__:
        raise ValueError(f"answer rule name {name!r} is already registered by {held.__module__}."
                         f"{held.__qualname__}; choose another name for {cls.__qualname__}")
    _RULES[name] = cls
    return cls


def unregister_answer_rule(name: str) -> None:
    """Remove the rule registered under ``name`` (none: nothing happens); for tests and
    plug-ins that register a rule for a while."""
    _RULES.pop(name, None)


def answer_rule_classes() -> dict[str, type[AnswerRule]]:
    """The registered rule classes by name, in registration order (the built-ins first)."""
    return dict(_RULES)


def answer_rule_names() -> list[str]:
    """Every name ``resolve_answer_rule`` takes: each rule, then each with ``+stop``."""
    return [*_RULES, *(n + STOP_SUFFIX for n in _RULES)]


def resolve_answer_rule(rule: str | AnswerRule) -> AnswerRule:
    """A name (``official``, ``threshold``, ``entropy``, each optionally ``+stop``) or an
    AnswerRule object -> the object, with its defaults. InputError on ``rule`` otherwise."""
    if isinstance(rule, AnswerRule):
        return rule
    if isinstance(rule, str):
        base = rule.removesuffix(STOP_SUFFIX)
        if base in _RULES:
            return _RULES[base](stop=rule != base)
    raise InputError("rule", f"is {rule!r}, not an answer rule",
                     f"use one of {', '.join(answer_rule_names())} or an AnswerRule object")


def transfer_counts(masked: int, steps: int) -> list[int]:
    """Official ``get_num_transfer_tokens`` of one block: ``masked`` tokens over ``steps``
    steps, ``masked // steps`` each and one more in the first ``masked % steps`` steps."""
    base, extra = divmod(masked, steps)
    return [base + (i < extra) for i in range(steps)]


@dataclass(frozen=True)
class AnswerRule:
    """A rule (module docstring). ``fixed_steps``: it runs the official steps per block (its
    per-step counts come from ``transfer_counts``); else a block runs until it is decoded.
    ``needs_entropy``: ``pick`` reads the entropy of each position (else None)."""

    stop: bool = field(default=False, kw_only=True)
    name: ClassVar[str] = ""
    fixed_steps: ClassVar[bool] = False
    needs_entropy: ClassVar[bool] = False

    @property
    def label(self) -> str:
        """The name it is chosen by (``official+stop``, ...)."""
        return self.name + (STOP_SUFFIX if self.stop else "")

    def pick(self, confidence: torch.Tensor, entropy: torch.Tensor | None, masked: torch.Tensor,
             counts: list[int] | None) -> torch.Tensor:
        """BoolTensor [A, n] of the masked positions to commit this step (confidence: -inf
        where not masked; ``counts``: the official counts, fixed-step rules only)."""
        raise NotImplementedError


@answer_rule
@dataclass(frozen=True)
class OfficialOrder(AnswerRule):
    """The official low-confidence order: ``counts[a]`` most confident masked tokens."""

    name: ClassVar[str] = "official"
    fixed_steps: ClassVar[bool] = True

    def pick(self, confidence: torch.Tensor, entropy: torch.Tensor | None, masked: torch.Tensor,
             counts: list[int] | None) -> torch.Tensor:
        assert counts is not None
        chosen = torch.zeros_like(masked)
        most = max(counts)
        if most == 0:
            return chosen
        top = confidence.topk(most, dim=1).indices  # official torch.topk, per row
        if min(counts) == most:
            return chosen.scatter_(1, top, True)
        rank = torch.arange(most, device=masked.device)
        keep = rank < index(counts, masked.device)[:, None]  # no host wait
        return chosen.scatter_(1, top, keep)


@answer_rule
@dataclass(frozen=True)
class ConfidenceThreshold(AnswerRule):
    """Fast-dLLM: commit every masked token with confidence >= tau, at least one."""

    tau: float = 0.9
    name: ClassVar[str] = "threshold"

    def __post_init__(self) -> None:
        object.__setattr__(self, "tau", check_number(
            "ConfidenceThreshold", "tau", self.tau, 0.0, 1.0, low_open=True,
            fix="tau is the probability a sampled token needs to be committed"))

    def pick(self, confidence: torch.Tensor, entropy: torch.Tensor | None, masked: torch.Tensor,
             counts: list[int] | None) -> torch.Tensor:
        return threshold_pick(confidence.masked_fill(~masked, 0.0), masked, self.tau)


@answer_rule
@dataclass(frozen=True)
class AnswerEntropyBound(AnswerRule):
    """EB-Sampler: the lowest-entropy masked tokens while their summed entropy <= gamma."""

    gamma: float = 0.1
    name: ClassVar[str] = "entropy"
    needs_entropy: ClassVar[bool] = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "gamma", check_number(
            "AnswerEntropyBound", "gamma", self.gamma, 0.0, 1e6,
            fix="gamma bounds the summed entropy (nats) of the tokens one step commits"))

    def pick(self, confidence: torch.Tensor, entropy: torch.Tensor | None, masked: torch.Tensor,
             counts: list[int] | None) -> torch.Tensor:
        assert entropy is not None
        return entropy_pick(entropy, masked, self.gamma)
