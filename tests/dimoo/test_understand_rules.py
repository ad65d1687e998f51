"""The answer rules by name (tasks/answer_rules.py) on the tiny checkpoint (float32, CPU).

Each name resolves to its object; each rule's forwards follow from its definition at the ends
of its parameter range; a ``+stop`` answer has the text of the same rule without the stop, in
no more forwards; the pick functions commit what their papers say.
"""

from __future__ import annotations

import copy

import pytest
import torch

from ladr_core import InputError
from ladr_core.dimoo import (
    AnswerEntropyBound,
    AnswerRule,
    ConfidenceThreshold,
    DiMOOPipeline,
    OfficialOrder,
    answer_rule,
    answer_rule_names,
)
from ladr_core.dimoo.tasks.answer_rules import resolve_answer_rule, transfer_counts

QUESTION = "a red circle left of the square"
LENGTH, BLOCK = 32, 8
BLOCKS = LENGTH // BLOCK


def _image() -> torch.Tensor:
    return torch.rand(1, 32, 32, 3, generator=torch.Generator().manual_seed(1))


def _answer(pipe: DiMOOPipeline, rule: object, temperature: float = 0.0, steps: int | None = None):
    return pipe.understand(_image(), QUESTION, max_answer=LENGTH, block_length=BLOCK,
                           steps=steps, rule=rule, temperature=temperature, seed=2, size="as is")


def test_every_name_resolves_to_a_rule_of_that_name() -> None:
    names = answer_rule_names()
    assert {"official", "threshold", "entropy", "official+stop"} <= set(names)
    for name in names:
        rule = resolve_answer_rule(name)
        assert rule.label == name and rule.stop == name.endswith("+stop")
    with pytest.raises(InputError, match=r"^rule is 'fastest'.*use one of official, "):
        resolve_answer_rule("fastest")


def test_transfer_counts_are_the_official_split() -> None:
    assert transfer_counts(8, 3) == [3, 3, 2]
    assert transfer_counts(256, 32) == [8] * 32
    assert transfer_counts(2, 4) == [1, 1, 0, 0]


def test_official_order_commits_its_count_most_confident_first() -> None:
    conf = torch.tensor([[0.1, 0.9, float("-inf"), 0.5], [0.3, 0.2, 0.8, 0.7]],
                        dtype=torch.float64)
    masked = conf > float("-inf")
    chosen = OfficialOrder().pick(conf, None, masked, [2, 1])
    assert chosen.tolist() == [[False, True, False, True], [False, False, True, False]]


def test_threshold_and_entropy_commit_at_least_one() -> None:
    conf = torch.tensor([[0.2, 0.95, 0.91, float("-inf")]], dtype=torch.float64)
    masked = conf > float("-inf")
    assert ConfidenceThreshold(tau=0.9).pick(conf, None, masked, None).tolist() == \
        [[False, True, True, False]]
    assert ConfidenceThreshold(tau=0.99).pick(conf, None, masked, None).tolist() == \
        [[False, True, False, False]]
    ent = torch.tensor([[0.5, 0.01, 0.02, 0.0]], dtype=torch.float64)
    assert AnswerEntropyBound(gamma=0.05).pick(conf, ent, masked, None).tolist() == \
        [[False, True, True, False]]
    assert AnswerEntropyBound(gamma=0.0).pick(conf, ent, masked, None).tolist() == \
        [[False, True, False, False]]


@pytest.mark.parametrize(("rule", "forwards"), [
    (ConfidenceThreshold(tau=1e-12), BLOCKS),  # every token clears it: one step per block
    (ConfidenceThreshold(tau=1.0), LENGTH),  # (almost) none does: one token per step
    (AnswerEntropyBound(gamma=1e6), BLOCKS),
    (AnswerEntropyBound(gamma=0.0), LENGTH),
])
def test_the_rules_forwards_at_the_ends_of_their_range(pipe: DiMOOPipeline, rule: object,
                                                      forwards: int) -> None:
    assert _answer(pipe, rule).nfe == [forwards]


def test_the_official_order_takes_its_steps(pipe: DiMOOPipeline) -> None:
    assert _answer(pipe, "official", steps=BLOCKS).nfe == [BLOCKS]
    assert _answer(pipe, "official").nfe == [LENGTH // 8]  # default: 8 tokens per step


@pytest.mark.parametrize("base", ["official", "threshold", "entropy"])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_stop_keeps_the_text_in_fewer_forwards(pipe: DiMOOPipeline, base: str,
                                               temperature: float) -> None:
    plain = _answer(pipe, base, temperature)
    tokens = plain.tokens[0].tolist()
    stopping = copy.copy(pipe)
    stopping.answer_end_id = tokens[BLOCK + 1]  # an end the answer decodes in block 1
    plain = _answer(stopping, base, temperature)
    stopped = _answer(stopping, base + "+stop", temperature)
    assert stopped.text == plain.text and stopped.rule == base + "+stop"
    assert stopped.nfe[0] <= plain.nfe[0]
    end = stopped.tokens[0].tolist().index(stopping.answer_end_id)
    assert stopped.tokens[0][:end].tolist() == plain.tokens[0][:end].tolist()


def test_a_new_rule_joins_by_name(pipe: DiMOOPipeline, monkeypatch: pytest.MonkeyPatch) -> None:
    """One decorated class is a new name, with no other edit (left to right: the leftmost
    masked token each step, one forward per token)."""
    from dataclasses import dataclass

    from ladr_core.dimoo.tasks import answer_rules

    monkeypatch.setattr(answer_rules, "_RULES", dict(answer_rules._RULES))

    @answer_rule
    @dataclass(frozen=True)
    class LeftToRight(AnswerRule):
        name = "left-to-right"

        def pick(self, confidence, entropy, masked, counts):  # noqa: ANN001, ANN202
            first = masked.int().argmax(dim=1, keepdim=True)
            return torch.zeros_like(masked).scatter_(1, first, True) & masked

    assert "left-to-right+stop" in answer_rule_names()
    res = _answer(pipe, "left-to-right")
    assert res.rule == "left-to-right" and res.nfe == [LENGTH]


@pytest.mark.parametrize("temperature", [0.0, 0.7])
@pytest.mark.parametrize("entropy", [False, True])
def test_sampling_a_window_in_chunks_changes_no_value(monkeypatch: pytest.MonkeyPatch,
                                                      temperature: float, entropy: bool) -> None:
    """answering.sample_window computes SAMPLE_CHUNK rows at a time (the 8B model's float64
    softmax is 1.1 GB per 1,024 rows): the tokens, probabilities and entropies equal those of
    the whole window at once, the noise included (drawn whole from the item's generator)."""
    from ladr_core.dimoo.tasks import answering

    logits = torch.randn(300, 50, generator=torch.Generator().manual_seed(3)) * 4
    runs = []
    for chunk in (1000, 64, 7):
        monkeypatch.setattr(answering, "SAMPLE_CHUNK", chunk)
        runs.append(answering.sample_window(logits, temperature,
                                            torch.Generator().manual_seed(9), entropy))
    for x0, p, ent in runs[1:]:
        assert torch.equal(x0, runs[0][0]) and torch.equal(p, runs[0][1])
        assert (ent is None) == (not entropy) and (ent is None or torch.equal(ent, runs[0][2]))
    assert runs[0][0].unique().numel() > 5  # the draws differ by row: the check can fail
