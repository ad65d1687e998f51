"""DiMOO Caption and DiMOO Ask (nodes/understand.py) over ``pipe.understand``: the rule list is
the core's registry, a batch gives one answer per image, one per line, each the library's answer
for that image alone (seed + i); the stats line carries the forwards the library counted; the
progress bar follows the run and Cancel stops it; every bad input gets one message naming it.
The tiny random checkpoint answers (its config does not say it cannot); the shipped nano that
draws cannot."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import ladr_core
from ladr_core.dimoo import ANSWER_SIZES
from ladr_core.dimoo.tasks.answer_rules import resolve_answer_rule
from nodes import host, validate
from nodes.handles import DiMOOModel
from nodes.understand import (
    ASK,
    CAPTION,
    CAPTION_QUESTION,
    LENGTH_FIX,
    DiMOOAsk,
    DiMOOCaption,
)

ARGS = dict(rule="official", max_answer=16, temperature=1.0, seed=5, size="as is")


@pytest.fixture(scope="module")
def tiny(dimoo_checkpoint: Path) -> DiMOOModel:
    pipe = ladr_core.load_dimoo(dimoo_checkpoint, dtype=torch.float32)
    return DiMOOModel(pipe=pipe, key=("tiny",), name="tiny")


def _images(n: int = 2, size: int = 32) -> torch.Tensor:
    return torch.rand(n, size, size, 3, generator=torch.Generator().manual_seed(n))


def _widgets(node: type) -> dict:
    return {i.id: i for i in node.define_schema().inputs}


@pytest.mark.parametrize("node", [DiMOOCaption, DiMOOAsk])
def test_the_choices_are_the_cores(node) -> None:
    w = _widgets(node)
    assert w["rule"].options == ladr_core.answer_rule_names()
    assert resolve_answer_rule(w["rule"].default).label == "official"
    assert w["size"].options == list(ANSWER_SIZES) and w["size"].default == "official"
    assert validate.attached_inputs(node) == ([] if node is DiMOOCaption else ["question"])


@pytest.mark.parametrize("rule", ["official", "threshold+stop"])
def test_a_batch_gets_the_librarys_answer_per_image_one_per_line(tiny, rule) -> None:
    images = _images(3)
    text, stats = DiMOOAsk.execute(model=tiny, image=images, question="what is it?",
                                   **{**ARGS, "rule": rule}).args
    lines = text.split("\n")
    alone = [tiny.pipe.understand(images[i:i + 1], "what is it?", max_answer=16, rule=rule,
                                  temperature=1.0, seed=5 + i, size="as is")
             for i in range(3)]
    assert lines == [" ".join(a.text[0].split()) for a in alone]
    forwards = re.match(rf"{re.escape(rule)}: ([\d, ]+) forwards per answer", stats).group(1)
    assert [int(n) for n in forwards.split(", ")] == [a.nfe[0] for a in alone]
    assert f"(official order: {alone[0].steps})" in stats


def test_caption_asks_the_caption_question(tiny) -> None:
    image = _images(1)
    (text, _) = DiMOOCaption.execute(model=tiny, image=image, **ARGS).args
    res = tiny.pipe.understand(image, CAPTION_QUESTION, max_answer=16, temperature=1.0, seed=5,
                               size="as is")
    assert text == " ".join(res.text[0].split())


def test_greedy_answers_ignore_the_seed(tiny) -> None:
    runs = {DiMOOAsk.execute(model=tiny, image=_images(1), question="what?",
                             **{**ARGS, "temperature": 0.0, "seed": s}).args[0] for s in (0, 9)}
    assert len(runs) == 1


def test_the_progress_bar_follows_the_run(tiny, monkeypatch) -> None:
    shown: list[int] = []
    monkeypatch.setattr(host.Progress, "update", lambda self, v, preview=None: shown.append(v))
    DiMOOCaption.execute(model=tiny, image=_images(2), **{**ARGS, "max_answer": 32})
    assert shown == sorted(shown) and shown[-1] == 1000 and len(set(shown)) >= 3


def test_cancel_stops_the_answer_and_the_next_run_is_a_fresh_one(tiny, monkeypatch) -> None:
    fresh = DiMOOCaption.execute(model=tiny, image=_images(1), **ARGS).args
    real = host.Progress.update
    pressed: list[int] = []

    def press_once(self, value, preview=None) -> None:  # Cancel during the first forward
        if not pressed:
            pressed.append(value)
            host.request_interrupt()
        real(self, value, preview)

    monkeypatch.setattr(host.Progress, "update", press_once)
    with pytest.raises(host.FallbackInterrupt):  # a BaseException, never swallowed
        DiMOOCaption.execute(model=tiny, image=_images(1), **ARGS)
    assert pressed
    monkeypatch.setattr(host.Progress, "update", real)
    again = DiMOOCaption.execute(model=tiny, image=_images(1), **ARGS).args
    untimed = [re.sub(r"[\d.]+ s\b", "_ s", stats) for _, stats in (fresh, again)]
    assert again[0] == fresh[0] and untimed[0] == untimed[1]


@pytest.mark.parametrize(("kw", "needle"), [
    ({"image": None}, "DiMOO Ask: image is missing"),
    ({"question": "  "}, "DiMOO Ask: question is empty"),
    ({"max_answer": 300}, "DiMOO Ask: max_answer=300 is not a multiple of block_length (256); "
                          "nearest valid max_answer: 256 or 512"),
    ({"max_answer": -1}, "DiMOO Ask: max_answer is -1; use a length in tokens, or 0"),
    ({"image": torch.rand(1, 30, 30, 3)}, "DiMOO Ask: image width is 30 px, not a multiple of "
                                          "4 px"),
    ({"image": torch.rand(1, 512, 512, 3)}, "DiMOO Ask: image is 512 x 512 px"),
    ({"max_answer": 256, "size": "official"}, "DiMOO Ask: image is 32 x 32 px, which needs"),
])
def test_each_mistake_is_one_message_on_its_input(tiny, kw, needle) -> None:
    args = dict(model=tiny, image=_images(1), question="what?", **ARGS)
    with pytest.raises(ValueError) as err:
        DiMOOAsk.execute(**{**args, **kw})
    assert str(err.value).startswith(needle), err.value
    if "not a multiple of 4 px" in needle:  # size 'as is' off the grid: the node's own fix
        assert "set size to 'official'" in str(err.value)
    if "max_answer" in kw and "image" in needle:  # an answer the context cannot hold
        assert LENGTH_FIX in str(err.value), err.value
    if "512 x 512" in needle:  # too large for the context: the largest size that fits
        assert re.search(r"\d+ x \d+", str(err.value).split(";", 1)[1]), err.value


def test_an_empty_question_is_refused_before_anything_runs() -> None:
    assert DiMOOAsk.validate_inputs(question=" \n") == "question is empty: write what to ask " \
        "about the image"
    assert DiMOOAsk.validate_inputs(question=None) is True  # fed by a link: checked at run


def _assert_refused_by_both(model: DiMOOModel) -> None:
    """Caption and Ask both refuse `model` on its input, naming the fix."""
    for node, name in ((DiMOOCaption, CAPTION), (DiMOOAsk, ASK)):
        extra = {"question": "what?"} if node is DiMOOAsk else {}
        with pytest.raises(ValueError) as err:
            node.execute(model=model, image=_images(1, 48), **extra, **ARGS)
        assert str(err.value).startswith(f"{name}: model cannot answer questions")
        assert "pick a checkpoint that can answer in Load DiMOO Model" in str(err.value)


def test_the_nano_that_only_draws_is_refused_on_model() -> None:
    from support.nodes import nano_pipe

    nano = DiMOOModel(pipe=nano_pipe(), key=("nano",), name="nano")
    assert not nano.pipe.can_understand
    _assert_refused_by_both(nano)


def _built_ins_that_only_draw() -> list[str]:
    """The loader's built-in choices whose config.json says they cannot answer (derived from
    nodes.loader.BUILT_IN and the shipped configs, so a new built-in joins by itself)."""
    import json

    from nodes.loader import BUILT_IN

    out = []
    for choice, function in BUILT_IN.items():
        config = Path(getattr(ladr_core, function)()) / "config.json"
        if config.is_file() and json.loads(config.read_text()).get("ladr_can_understand") is False:
            out.append(choice)
    return out


def test_the_emoji_model_is_among_those_that_only_draw() -> None:
    from nodes.loader import EMOJI, NANO

    if not (ladr_core.emoji_model_path() / "config.json").is_file():
        pytest.skip("dimoo-emoji is not shipped in this checkout")
    assert {NANO, EMOJI} <= set(_built_ins_that_only_draw())


@pytest.mark.parametrize("choice", _built_ins_that_only_draw())
def test_every_built_in_that_only_draws_is_refused_on_model(choice) -> None:
    """Loaded by the loader's own choice, each is refused by both nodes with the message the
    plain nano gets (above)."""
    from nodes.loader import LoadDiMOOModel

    (model,) = LoadDiMOOModel.execute(model_name=choice, dtype="fp32").args
    _assert_refused_by_both(model)


def test_a_nan_temperature_is_named_before_the_model_is_judged() -> None:
    """A damaged workflow's NaN (which passes the host's range check) gets its own message on
    `temperature`, even on a checkpoint that cannot answer (the workflow fuzz's order)."""
    from support.nodes import nano_pipe

    nano = DiMOOModel(pipe=nano_pipe(), key=("nano",), name="nano")
    for node, name in ((DiMOOCaption, CAPTION), (DiMOOAsk, ASK)):
        extra = {"question": "what?"} if node is DiMOOAsk else {}
        with pytest.raises(ValueError) as err:
            node.execute(model=nano, image=_images(1, 48), **extra,
                         **{**ARGS, "temperature": float("nan")})
        assert str(err.value).startswith(f"{name}: temperature is NaN")


@pytest.mark.parametrize("node", [DiMOOCaption, DiMOOAsk])
def test_the_answer_rule_socket_is_typed_and_appended_last(node) -> None:
    from nodes.handles import ANSWER_RULE_TYPE

    last = node.define_schema().inputs[-1]
    assert (last.id, last.io_type, last.optional) == ("answer_rule", ANSWER_RULE_TYPE, True)


def test_the_answer_rule_node_offers_the_registry_and_its_rule_runs(tiny) -> None:
    """DiMOO Answer Rule's choices are the registered rules, a toy rule registered in this test
    included; its object through Ask's answer_rule socket runs as the Python API runs it (the
    rule widget, 'official', is then not read)."""
    from dataclasses import dataclass
    from typing import ClassVar

    from ladr_core.dimoo import ConfidenceThreshold, answer_rule
    from ladr_core.dimoo.tasks.answer_rules import unregister_answer_rule
    from nodes.answer_rule import AnswerRuleNode

    @answer_rule
    @dataclass(frozen=True)
    class Eager(ConfidenceThreshold):
        name: ClassVar[str] = "eager-test"

    try:
        rule_widget = _widgets(AnswerRuleNode)["rule"]
        assert rule_widget.options == list(ladr_core.dimoo.answer_rule_classes())
        assert "eager-test" in rule_widget.options
        (rule,) = AnswerRuleNode.execute(rule="eager-test", tau=0.3, gamma=-1.0, stop=True).args
        assert rule == Eager(tau=0.3, stop=True) and rule.label == "eager-test+stop"
        image = _images(1)
        text, stats = DiMOOAsk.execute(model=tiny, image=image, question="what?",
                                       answer_rule=rule, **ARGS).args
        ref = tiny.pipe.understand(image, "what?", max_answer=16, rule=rule, temperature=1.0,
                                   seed=5, size="as is")
        assert text == " ".join(ref.text[0].split()) and stats.startswith("eager-test+stop: ")
    finally:
        unregister_answer_rule("eager-test")
    assert "eager-test" not in _widgets(AnswerRuleNode)["rule"].options


def test_the_answer_rule_node_names_the_widget_a_rule_refuses() -> None:
    from nodes.answer_rule import NUMBERS, AnswerRuleNode, reads

    with pytest.raises(ValueError, match=r"^DiMOO Answer Rule: tau for rule 'threshold': .*"
                       r"tau must be a finite number in \(0, 1\]; got 0.0"):
        AnswerRuleNode.execute(rule="threshold", tau=0.0, gamma=-1.0, stop=False)
    with pytest.raises(ValueError, match=r"^answer_rule: got a builtins.str, not this version"):
        DiMOOCaption.execute(model=None, image=_images(1), answer_rule="threshold", **ARGS)
    # every numeric field of a registered rule has its widget (a new one fails here)
    from dataclasses import fields

    for name, cls in ladr_core.dimoo.answer_rule_classes().items():
        numeric = {f.name for f in fields(cls) if f.type in (float, "float")}
        assert numeric <= set(NUMBERS) and set(reads(name)) == numeric, name
