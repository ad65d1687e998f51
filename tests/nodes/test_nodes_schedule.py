"""The schedule is one value the sampler nodes build from their steps and denoise widgets
(``ladr_core.StepSchedule``) and the library builds from generate's arguments: the node and
generate run every LADR preset (``ladr_core.PRESETS``, read from the code) on the same
schedule, the node's steps, whatever the preset; a bad steps or denoise (a workflow edited by
hand, a linked input) and a preset name this version no longer has are each one message naming
that input and the fix, before any work."""

from __future__ import annotations

import math

import pytest
from support.nodes import SAMPLER_DEFAULTS, policy_fields

import ladr_core
from ladr_core import MAX_STEPS, PRESETS, StepSchedule, Strategy
from nodes import events
from nodes.edit import DiMOOEdit
from nodes.policy import PRESET_OPTIONS, LADRPolicyNode
from nodes.rules import SamplingRuleNode
from nodes.sampler import DiMOOSampler
from nodes.sampler_legacy import LegacyDiMOOSampler

STEPS = 12  # no preset was ever tuned at 12


def _defaults(node: type) -> dict:
    return {i.id: i.default for i in node.define_schema().inputs
            if getattr(i, "default", None) is not None}


def _sampler(model, **kw) -> tuple:
    widgets = {k: SAMPLER_DEFAULTS[k] for k in ("prompt", "negative_prompt", "cfg",
                                                "temperature", "seed")}
    return DiMOOSampler.execute(model=model, **{**_defaults(DiMOOSampler), **widgets, **kw}).args


def _node_t(model, preset: str, sent: list) -> tuple[int, Strategy]:
    """The T the DiMOO Sampler node ran a preset at (its step events, the same as the T its
    stats plan) and the strategy it built."""
    policy = LADRPolicyNode.execute(preset=preset, **policy_fields()).args[0]
    rule = SamplingRuleNode.execute(policy=policy, **{**_defaults(SamplingRuleNode),
                                                      "strategy": "ladr"}).args[0]
    tokens = _sampler(model, steps=STEPS, rule=rule)[0]
    ts = {p["steps"] for e, p in sent if e == events.EVENT and not p["done"]}
    assert ts == {tokens.stats["steps_planned"]}, (ts, tokens.stats)
    return ts.pop(), rule.strategy


def _generate_t(model, strategy: Strategy) -> int:
    """The T the library's generate runs `strategy` at for the same steps (its step records)."""
    records: list[dict] = []
    model.pipe.generate(SAMPLER_DEFAULTS["prompt"], width=48, height=48, steps=STEPS,
                        cfg=SAMPLER_DEFAULTS["cfg"], seed=SAMPLER_DEFAULTS["seed"],
                        strategy=strategy, callback=records.append, decode=False)
    return int(records[0]["steps"])


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_the_node_and_generate_run_every_preset_at_the_nodes_steps(fake_model, sent,
                                                                   preset: str) -> None:
    node_t, strategy = _node_t(fake_model, preset, sent)
    assert strategy == ladr_core.LADR.preset(preset)
    assert node_t == _generate_t(fake_model, strategy) == STEPS


def _run_node(node: type, model, steps: int) -> None:
    if node is DiMOOSampler:
        _sampler(model, steps=steps)
    elif node is LegacyDiMOOSampler:
        node.execute(model=model, **{**SAMPLER_DEFAULTS, "steps": steps})
    else:  # the schedule is checked before the picture
        node.execute(model=model, **{**_defaults(node), "steps": steps, "image": None,
                                     "instruction": "make it blue"})


@pytest.mark.parametrize("bad", [0, -1, MAX_STEPS + 1])
@pytest.mark.parametrize("node", [DiMOOSampler, LegacyDiMOOSampler, DiMOOEdit])
def test_a_bad_steps_is_one_message_on_it_before_any_work(fake_model, seen, node: type,
                                                          bad: int) -> None:
    name = "DiMOO Edit" if node is DiMOOEdit else "DiMOO Sampler"
    with pytest.raises(ValueError, match=rf"^{name}: steps is {bad}; give a whole number of "
                                         rf"steps from 1 to {MAX_STEPS}"):
        _run_node(node, fake_model, bad)
    assert seen == []


@pytest.mark.parametrize("bad", [0.0, -0.25, 1.5, math.nan])
def test_a_bad_denoise_is_one_message_on_it_before_any_work(fake_model, seen,
                                                            bad: float) -> None:
    with pytest.raises(ValueError, match=r"^DiMOO Sampler: denoise is .*; give a number above 0 "
                                         r"and at most 1"):
        _sampler(fake_model, steps=STEPS, denoise=bad)
    assert seen == []


def test_the_steps_widget_stops_where_the_schedule_does() -> None:
    steps = next(i for i in DiMOOSampler.define_schema().inputs if i.id == "steps")
    assert (steps.min, steps.max) == (1, MAX_STEPS)
    StepSchedule(steps.max)  # the widget's whole range is a schedule


def test_a_preset_this_version_no_longer_has_is_one_message_on_it() -> None:
    message = LADRPolicyNode.validate_inputs(preset="turbo")
    assert message.startswith("LADR Policy: preset 'turbo' is not one of ")
    assert "; choose one of them" in message
    assert all(LADRPolicyNode.validate_inputs(preset=p) is True for p in PRESET_OPTIONS)
