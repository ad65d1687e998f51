"""The schedule length T has one owner, ``Strategy.run_steps``: the sampler node and the
library's ``generate`` run every preset of the registry (``ladr_core.PRESETS``) at the same T for
the same `steps`, the preset's own T when it brings one; and both take T from that one function,
so a second copy of the rule in either path makes these tests fail."""

from __future__ import annotations

import pytest
from support.nodes import SAMPLER_DEFAULTS, policy_fields

import ladr_core
from ladr_core import PRESETS, Strategy
from nodes import events
from nodes.policy import LADRPolicyNode
from nodes.rules import SamplingRuleNode
from nodes.sampler import DiMOOSampler

STEPS = 12  # the node's steps: no preset is tuned at 12, so a preset's own T shows


def _defaults(node: type) -> dict:
    return {i.id: i.default for i in node.define_schema().inputs
            if getattr(i, "default", None) is not None}


def _node_t(model, preset: str, sent: list) -> tuple[int, Strategy]:
    """The T the DiMOO Sampler node ran a preset at (its step events, the same as the T its
    stats plan) and the strategy it built."""
    policy = LADRPolicyNode.execute(preset=preset, **policy_fields()).args[0]
    rule = SamplingRuleNode.execute(policy=policy, **{**_defaults(SamplingRuleNode),
                                                      "strategy": "ladr"}).args[0]
    widgets = {k: SAMPLER_DEFAULTS[k] for k in ("prompt", "negative_prompt", "cfg",
                                                "temperature", "seed")}
    tokens = DiMOOSampler.execute(model=model, **{**_defaults(DiMOOSampler), **widgets,
                                                  "steps": STEPS, "rule": rule}).args[0]
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
def test_the_node_and_generate_run_every_preset_at_the_same_t(fake_model, sent,
                                                              preset: str) -> None:
    node_t, strategy = _node_t(fake_model, preset, sent)
    assert strategy == ladr_core.LADR.preset(preset)
    want = PRESETS[preset].steps or STEPS  # a preset's own T wins over the node's steps
    assert node_t == _generate_t(fake_model, strategy) == want


def test_both_paths_take_t_from_the_one_function(fake_model, sent, monkeypatch) -> None:
    """Replace the one owner: the node and generate both follow it (a copy would not)."""
    real = Strategy.run_steps
    monkeypatch.setattr(Strategy, "run_steps", lambda self, requested=None: min(
        real(self, requested), 5))
    node_t, strategy = _node_t(fake_model, "nano", sent)
    assert node_t == _generate_t(fake_model, strategy) == 5


def test_a_tuned_t_wins_and_a_strategy_without_one_takes_steps() -> None:
    nano = ladr_core.LADR.preset("nano")
    assert nano.run_steps(STEPS) == PRESETS["nano"].steps == nano.run_steps()
    assert nano.at_steps(STEPS).run_steps(64) == STEPS
    assert ladr_core.Baseline().run_steps(STEPS) == STEPS
    assert ladr_core.Baseline().run_steps() == ladr_core.DEFAULT_STEPS
    for bad in (0, 2.5, True, "64"):  # refused whether it would be used or not
        with pytest.raises(ValueError, match=r"steps must be an int >= 1 .*got"):
            nano.run_steps(bad)
