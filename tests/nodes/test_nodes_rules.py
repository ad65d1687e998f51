"""The sampler's training-free rules (nodes/rules.py), from the registry: every registered
strategy is a choice of the sampler; each rule reads exactly the rule widgets that are fields of
its strategy, reaches the core with them, runs at its tuned T, refuses a bad value naming the
widget, and has its entry (with its tuned values) in the sampler's help page. Runs on the real
nano pipeline."""

from __future__ import annotations

import re
from dataclasses import fields, replace
from pathlib import Path

import pytest
from support.nodes import SAMPLER_DEFAULTS

from ladr_core import StepSchedule, resolve_strategy, strategy_names
from nodes.rules import AUTO, RULES, STRATEGIES, WIDGETS, RuleFields, applies
from nodes.run import FORMER_T
from nodes.sampler_legacy import LegacyDiMOOSampler

HELP = (Path(__file__).resolve().parents[2] / "web" / "docs" / "LADR_SamplingRule" / "en.md").read_text()
# a value each widget's strategy refuses, within the widget's own range (-1 .. max)
REFUSED = {"tau": -0.5, "gamma": -0.5, "token": "top1"}


def run(model, **kw) -> tuple:
    return LegacyDiMOOSampler.execute(model=model, **{**SAMPLER_DEFAULTS, **kw}).args


def test_every_registered_strategy_is_a_choice_and_the_rules_are_the_rest() -> None:
    assert sorted(STRATEGIES) == sorted(strategy_names())
    assert set(RULES) == set(strategy_names()) - {"baseline", "ladr", "prophet"}
    assert RULES, "no rule registered"


@pytest.mark.parametrize("name", RULES)
def test_a_rule_reads_the_widgets_that_are_its_fields(name: str) -> None:
    own = {f.name for f in fields(resolve_strategy(name))}
    want = {w for w in WIDGETS if w in own} | ({"tau"} if "policy" in own else set())
    assert set(applies(name)) == want
    # widgets it does not read change nothing, even with values its strategy would refuse
    ignored = {w: REFUSED[w] for w in WIDGETS if w not in want}
    assert RuleFields(**ignored).strategy(name) == resolve_strategy(name)


@pytest.mark.parametrize("name", RULES)
def test_a_rule_reaches_the_core_with_its_widgets_at_the_nodes_steps(fake_model, sent, seen,
                                                                      name: str) -> None:
    default = resolve_strategy(name)
    tokens, text = run(fake_model, strategy=name)
    assert seen[-1]["strategy"] == default and seen[-1]["steps"] == StepSchedule(12)
    assert tokens.stats["nfe"] <= 12
    assert text.startswith(f"{name}: ")
    former = FORMER_T.get(f"rule {name}")  # a rule that once brought its own T says so
    if former is None:
        assert "no longer brings" not in text
    else:
        assert text.endswith(f"; rule {name} no longer brings its own T={former}: it runs "
                             "steps=12, never more forward passes than the official sampler")
    read = applies(name)
    values = {"tau": 0.5, "gamma": 2.0, "token": "argmax"}
    run(fake_model, strategy=name, **values)
    want = default
    if "tau" in read:
        want = replace(want, policy=replace(want.policy, tau=(0.5,) * 3)) \
            if hasattr(want, "policy") else replace(want, tau=0.5)
    want = replace(want, **{w: values[w] for w in ("gamma", "token") if w in read})
    assert seen[-1]["strategy"] == want and (want != default) == bool(read)


@pytest.mark.parametrize(("name", "widget"), [(n, w) for n in RULES for w in applies(n)])
def test_a_value_the_rule_refuses_is_one_message_naming_the_widget(fake_model, seen, name: str,
                                                                   widget: str) -> None:
    with pytest.raises(ValueError, match=rf"^DiMOO Sampler: {widget} for strategy '{name}': "
                                         rf".*{widget}"):
        run(fake_model, strategy=name, **{widget: REFUSED[widget]})
    assert seen == []  # refused before any work


def test_saved_sampler_values_without_the_rule_widgets_get_the_tuned_rules(fake_model,
                                                                            seen) -> None:
    """A workflow saved before the widgets existed passes none of them."""
    run(fake_model, strategy="threshold")
    assert seen[-1]["strategy"] == resolve_strategy("threshold")
    assert RuleFields() == RuleFields(tau=AUTO, gamma=AUTO, token="sample")


@pytest.mark.parametrize("name", strategy_names())
def test_the_help_page_describes_every_strategy_with_its_tuned_values(name: str) -> None:
    entry = HELP[HELP.index("- `strategy`:"):HELP.index("- `tau`:")]
    assert f"`{name}`" in entry
    if name not in RULES:
        return
    line = next(x for x in entry.splitlines() if x.startswith(f"  - `{name}`:"))
    default = resolve_strategy(name)
    assert not re.search(r"\bT \d", line), line  # no rule brings a step count of its own
    for widget in ("tau", "gamma"):
        if widget not in applies(name):
            continue
        value = default.policy.tau[0] if widget == "tau" and hasattr(default, "policy") \
            else getattr(default, widget)
        assert f"{widget} {value:g}" in line, (line, widget, value)
