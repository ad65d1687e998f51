"""DiMOO Answer Rule node -> the LADR_ANSWER_RULE socket: how DiMOO Caption and DiMOO Ask decode
an answer, as one AnswerRule object (ladr_core/dimoo/tasks/answer_rules.py). The choices are the
registered rules; a numeric widget reaches a rule with a field of its name (`reads`), -1 keeps
the rule's default.
"""

from __future__ import annotations

from dataclasses import fields

from ladr_core.dimoo import AnswerRule, answer_rule_classes

from . import host, register_node
from .handles import ANSWER_RULE_TYPE
from .validate import check_numbers

io, _ = host.v3()

NODE = "DiMOO Answer Rule"
AUTO = -1.0
NUMBERS = ("tau", "gamma")
"""The numeric widgets; a rule reads the ones that are fields of its dataclass."""


def rule_choices() -> list[str]:
    """The `rule` widget's options: every registered answer rule, official first."""
    return list(answer_rule_classes())


def reads(name: str) -> list[str]:
    """The numeric widgets rule `name` reads (its dataclass fields among NUMBERS)."""
    own = {f.name for f in fields(answer_rule_classes()[name])}
    return [w for w in NUMBERS if w in own]


def build_answer_rule(name: str, stop: bool, numbers: dict[str, float]) -> AnswerRule:
    """Rule `name` with `stop` and the widgets it reads; a bad choice or a value the rule refuses
    is one ValueError "<node>: <widget> ..."."""
    classes = answer_rule_classes()
    if name not in classes:
        raise ValueError(f"{NODE}: rule {name!r} is not one of {list(classes)}")
    check_numbers(NODE, numbers)  # NaN named by its widget, read or not
    given = {w: float(numbers[w]) for w in reads(name) if float(numbers[w]) != AUTO}
    try:
        return classes[name](stop=bool(stop), **given)
    except (TypeError, ValueError) as exc:
        widget = next((w for w in given if w in str(exc)), "rule")
        raise ValueError(f"{NODE}: {widget} for rule {name!r}: {exc} (or {widget} = -1: the "
                         "rule's default)") from None


def _tooltip(widget: str, text: str) -> str:
    users = ", ".join(n for n in rule_choices() if widget in reads(n))
    return f"{text} Read by rule {users}; -1 = the rule's default."


@register_node(menu=170)
class AnswerRuleNode(io.ComfyNode):
    """The answer rule as one socket: a rule with its settings, for DiMOO Caption and Ask."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        names = rule_choices()
        return io.Schema(
            node_id="LADR_AnswerRule",
            display_name=NODE,
            category="LADR",
            search_aliases=["answer rule", "caption rule", "text decoding", "threshold",
                            "entropy"],
            description="How DiMOO Caption and DiMOO Ask decode an answer: the official order "
            "(default) or a faster rule, with its settings. Connect to their answer_rule.",
            inputs=[
                io.Combo.Input("rule", options=names, default=names[0],
                               tooltip="official: the official order (a fixed number of "
                               "forwards per block). threshold / entropy: several confident "
                               "tokens per forward (fewer forwards)."),
                io.Float.Input("tau", default=AUTO, min=AUTO, max=1.0, step=0.01,
                               tooltip=_tooltip("tau", "The probability a sampled token needs "
                                                "to be committed, in (0, 1].")),
                io.Float.Input("gamma", default=AUTO, min=AUTO, max=100.0, step=0.05,
                               tooltip=_tooltip("gamma", "Summed entropy bound in nats, >= 0: "
                                                "larger commits more tokens per forward.")),
                io.Boolean.Input("stop", default=False,
                                 tooltip="End the answer as soon as its end is decoded (and "
                                 "every token before it), not at the end of the block."),
            ],
            outputs=[io.Custom(ANSWER_RULE_TYPE).Output(
                "answer_rule", tooltip="-> DiMOO Caption's or DiMOO Ask's answer_rule.")],
        )

    @classmethod
    def execute(cls, rule: str, tau: float, gamma: float, stop: bool) -> io.NodeOutput:
        return io.NodeOutput(build_answer_rule(rule, stop, {"tau": tau, "gamma": gamma}))
