"""DiMOO Sampler composed the ComfyUI way (nodes/sampler.py, rules.py, canvas.py) on the shipped
DiMOO-nano model: the rule through one socket (DiMOO Sampling Rule), the canvas through another
(DiMOO Canvas, DiMOO Paint Canvas), at most 14 inputs; the legacy sampler with its own widgets
samples the same tokens as the composition its widgets describe; the strategy object the rule
node builds is the one the pipeline runs, at the T settled once; stale socket values get one
message naming the input and the fix."""

from __future__ import annotations

import asyncio
import inspect

import pytest
import torch
from support.nodes import SAMPLER_DEFAULTS, policy_fields

from ladr_core import DEFAULT_STRATEGY, LADR, StepSchedule, Strategy, resolve_strategy
from nodes import node_classes
from nodes.canvas import CanvasNode, PaintCanvasNode
from nodes.handles import Canvas, SamplingRule
from nodes.paint import PaintOptionsNode
from nodes.policy import LADRPolicyNode, ProphetPolicyNode
from nodes.rules import AUTO, SamplingRuleNode
from nodes.sampler import DiMOOSampler
from nodes.sampler_legacy import LegacyDiMOOSampler

MAX_INPUTS = 14
WIDGETS = ("prompt", "negative_prompt", "steps", "cfg", "temperature", "seed",
           "one_prompt_per_line")
PAINT = dict(mask_threshold=0.4, mask_grow=1, paste_back=True, feather=-1, fit="exact")


def _defaults(node: type) -> dict:
    return {i.id: i.default for i in node.define_schema().inputs
            if getattr(i, "default", None) is not None}


def rule(strategy: str = "ladr", policy: Strategy | None = None, **kw) -> SamplingRule:
    args = {**_defaults(SamplingRuleNode), "strategy": strategy, **kw}
    return SamplingRuleNode.execute(policy=policy, **args).args[0]


def new(model, **kw) -> tuple:
    args = {**_defaults(DiMOOSampler), **{k: SAMPLER_DEFAULTS[k] for k in WIDGETS}, **kw}
    return DiMOOSampler.execute(model=model, **args).args


def legacy(model, **kw) -> tuple:
    return LegacyDiMOOSampler.execute(model=model, **{**SAMPLER_DEFAULTS, **kw}).args


def test_the_sampler_keeps_at_most_14_inputs_and_its_rule_and_canvas_are_sockets() -> None:
    inputs = {i.id: i for i in DiMOOSampler.define_schema().inputs}
    assert len(inputs) <= MAX_INPUTS < len(LegacyDiMOOSampler.define_schema().inputs)
    assert inputs["rule"].optional and inputs["canvas"].optional
    assert inputs["rule"].io_type == SamplingRuleNode.define_schema().outputs[0].io_type
    for node in (CanvasNode, PaintCanvasNode):
        assert inputs["canvas"].io_type == node.define_schema().outputs[0].io_type


@pytest.mark.parametrize("node", node_classes(), ids=lambda c: c.define_schema().node_id)
def test_every_node_takes_its_inputs_as_named_arguments(node: type) -> None:
    """execute's parameters are the schema's inputs, by name (no **kwargs tunnel)."""
    params = inspect.signature(node.execute).parameters
    assert not any(p.kind is p.VAR_KEYWORD for p in params.values())
    assert sorted(params) == sorted(i.id for i in node.define_schema().inputs)


CASES = {
    "defaults": ({}, {}, {}),
    "nano preset, its own T": ({"policy": "nano", "steps": 64}, {"policy": "nano"}, {}),
    "baseline": ({"strategy": "baseline"}, {"strategy": "baseline"}, {}),
    "a rule with tau": ({"strategy": "threshold", "tau": 0.7},
                        {"strategy": "threshold", "tau": 0.7}, {}),
    "size and batch": ({"width": 32, "height": 48, "batch_size": 2}, {},
                       {"width": 32, "height": 48, "batch_size": 2}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_legacy_widgets_sample_what_their_composition_samples(fake_model, sent,
                                                                  case: str) -> None:
    """The legacy sampler's widgets and the rule + canvas nodes they describe: equal tokens."""
    old_kw, rule_kw, canvas_kw = CASES[case]
    old_kw, rule_kw = dict(old_kw), dict(rule_kw)
    for kw in (old_kw, rule_kw):
        if "policy" in kw:
            kw["policy"] = LADRPolicyNode.execute(preset=kw["policy"], **policy_fields()).args[0]
    steps = old_kw.get("steps", SAMPLER_DEFAULTS["steps"])
    before, _ = legacy(fake_model, **old_kw)
    canvas = asyncio.run(CanvasNode.execute(**{**_defaults(CanvasNode), "width": 48,
                                               "height": 48, **canvas_kw})).args[0]
    after, _ = new(fake_model, rule=rule(**rule_kw), canvas=canvas, steps=steps)
    assert torch.equal(before.tokens, after.tokens) and before.grid == after.grid


def test_painting_through_the_paint_canvas_equals_the_legacy_image_mask_and_paint(
        fake_model, sent) -> None:
    g = torch.Generator().manual_seed(4)
    image = torch.nn.functional.interpolate(torch.rand(1, 3, 6, 6, generator=g), size=(48, 48),
                                            mode="bilinear").permute(0, 2, 3, 1).contiguous()
    mask = torch.zeros(1, 48, 48)
    mask[:, 8:28, 12:36] = 1.0
    options = PaintOptionsNode.execute(**PAINT).args[0]
    before, _ = legacy(fake_model, image=image, mask=mask, paint=options,
                       strategy=DEFAULT_STRATEGY)
    canvas = PaintCanvasNode.execute(image=image, mask=mask, batch_size=1, **PAINT).args[0]
    after, _ = new(fake_model, canvas=canvas)
    assert torch.equal(before.tokens, after.tokens) and after.paint is not None


def test_without_rule_or_canvas_the_default_rule_draws_one_image_at_the_default_size(
        fake_model, sent, seen) -> None:
    """No rule connected: the default strategy at the node's steps, with no note about a T it
    brought before the cost contract (that note is for a rule a workflow chose)."""
    tokens, text = new(fake_model)
    assert seen[-1]["strategy"] == resolve_strategy(DEFAULT_STRATEGY)
    assert seen[-1]["steps"] == StepSchedule(SAMPLER_DEFAULTS["steps"])
    assert tokens.tokens.shape == (1, 144) and (tokens.width, tokens.height) == (48, 48)
    assert text.startswith(f"{DEFAULT_STRATEGY}: ") and "no longer" not in text


def test_the_rule_object_runs_as_built_at_the_nodes_steps(fake_model, sent, seen) -> None:
    """The strategy the rule node built is the object the pipeline receives (no name to
    resolve again), on the schedule of the node's steps; a preset that used to bring its own T
    (a saved workflow's nano) says so once, in the stats line."""
    nano = LADRPolicyNode.execute(preset="nano", **policy_fields()).args[0]
    built = rule(policy=nano)
    tokens, text = new(fake_model, rule=built, steps=64)
    assert seen[-1]["strategy"] is built.strategy and seen[-1]["steps"] == StepSchedule(64)
    assert tokens.stats["steps_planned"] == 64 and tokens.stats["nfe"] <= 64
    note = "preset nano no longer brings its own T=128: it runs steps=64"
    assert text.count(note) == 1 and text.endswith(
        f"; {note}, never more forward passes than the official sampler")
    _, text = new(fake_model, rule=built, steps=128)  # the T it used to bring: nothing changed
    assert seen[-1]["steps"] == StepSchedule(128) and "no longer brings" not in text


def test_a_policy_of_another_kind_is_not_used_and_the_stats_line_says_so(fake_model, sent,
                                                                         seen) -> None:
    prophet = ProphetPolicyNode.execute(**_defaults(ProphetPolicyNode)).args[0]
    built = rule("ladr", policy=prophet)
    assert built.strategy == resolve_strategy("ladr")
    _, text = new(fake_model, rule=built)
    assert text.endswith("; the connected Prophet Policy was not used (strategy is 'ladr')")


def test_a_rule_widget_the_strategy_refuses_names_the_rule_node_and_widget() -> None:
    with pytest.raises(ValueError, match=r"^DiMOO Sampling Rule: gamma for strategy "
                                         r"'entropy': .*\(or gamma = -1: the tuned value\)"):
        rule("entropy", gamma=-0.5)
    assert rule("entropy", gamma=AUTO).strategy == resolve_strategy("entropy")


class _Elsewhere:  # a socket value made by another pack version (another class)
    strategy = LADR()


@pytest.mark.parametrize(("name", "fix"), [("rule", "DiMOO Sampling Rule"),
                                           ("canvas", "DiMOO Canvas"),
                                           ("cache", "ML-Cache Options")])
def test_a_stale_socket_value_is_one_message_naming_the_input_and_fix(fake_model, seen,
                                                                      name: str,
                                                                      fix: str) -> None:
    with pytest.raises(ValueError, match=rf"^{name}: got a .*_Elsewhere, not this version's "
                                         rf".*; re-create the {fix}.* node and reconnect it$"):
        new(fake_model, **{name: _Elsewhere()})
    assert seen == []  # refused before any work


def test_a_strategy_object_on_the_rule_socket_is_refused_naming_the_rule_node(fake_model,
                                                                             seen) -> None:
    """An LADR Policy wired straight to the sampler (an API prompt can) is not a rule."""
    with pytest.raises(ValueError, match=r"^rule: got a ladr_core\..*LADR, not this version's "
                                         r"sampling rule .*DiMOO Sampling Rule"):
        new(fake_model, rule=LADR())
    with pytest.raises(ValueError, match=r"^policy: got a .*_Elsewhere, .*re-create the LADR "
                                         r"Policy node"):
        rule(policy=_Elsewhere())


def _prompt(model: str, compiled: bool = False) -> dict:
    """An API prompt: Load DiMOO Model (-> Compile DiMOO) -> DiMOO Sampler <- DiMOO Canvas."""
    prompt = {"1": {"class_type": "LADR_LoadDiMOOModel", "inputs": {"model_name": model}},
              "2": {"class_type": "LADR_Canvas", "inputs": {"width": 48, "height": 48}},
              "3": {"class_type": "LADR_DiMOOSampler2",
                    "inputs": {"model": ["4" if compiled else "1", 0], "canvas": ["2", 0]}}}
    if compiled:
        prompt["4"] = {"class_type": "LADR_CompileDiMOO", "inputs": {"model": ["1", 0]}}
    return prompt


@pytest.mark.parametrize("compiled", [False, True])
def test_a_canvas_size_is_checked_on_the_connected_models_grid_alone(monkeypatch,
                                                                      compiled) -> None:
    """Issue 63: the canvas reads which model its sampler is connected to from the prompt about
    to run and names that model's grid only (not every model's); nano's 4 px sizes pass."""
    hidden = type("Hidden", (), {"prompt": _prompt("dimoo-nano (built-in)", compiled),
                                 "unique_id": "2"})
    monkeypatch.setattr(CanvasNode, "hidden", hidden)
    with pytest.raises(ValueError) as err:
        asyncio.run(CanvasNode.execute(width=50, height=48, batch_size=1))
    assert str(err.value) == ("DiMOO Canvas: width=50 is off the token grid of the connected "
                              "model dimoo-nano (one token per 4 x 4 px); nearest valid width: "
                              "48 or 52")
    assert asyncio.run(CanvasNode.execute(width=52, height=44, batch_size=1)).args[0].width == 52


def test_canvas_checks_name_the_canvas_input(fake_model, seen) -> None:
    # one message, on the input that is wrong, with every model's grid (none is known yet)
    with pytest.raises(ValueError, match=r"^DiMOO Canvas: height=50 is on no model's token grid "
                       r"\(dimoo-nano draws one token per 4 x 4 px, Lumina-DiMOO 8B one per 16 "
                       r"x 16 px\); nearest valid height: 48 or 52 for dimoo-nano, 48 or 64 for "
                       r"Lumina-DiMOO 8B$"):
        asyncio.run(CanvasNode.execute(width=48, height=50, batch_size=1))
    nano = asyncio.run(CanvasNode.execute(width=40, height=0, batch_size=1))
    assert nano.args[0].width == 40  # nano's grid
    blank = torch.zeros(1, 64, 64)  # Load Image's mask when nothing was painted
    with pytest.raises(ValueError, match=r"^DiMOO Paint Canvas: mask is empty and not the "
                                         r"image's size"):
        PaintCanvasNode.execute(image=torch.rand(1, 48, 48, 3), mask=blank, batch_size=1,
                                **PAINT)
    odd = PaintCanvasNode.execute(image=torch.rand(1, 50, 50, 3), mask=torch.ones(1, 50, 50),
                                  batch_size=1, **PAINT).args[0]
    with pytest.raises(ValueError, match=r"^DiMOO Sampler: canvas's image .*; set fit to crop "
                                         r"or resize in DiMOO Paint Canvas"):
        new(fake_model, canvas=odd)
    big = Canvas(width=2048, height=2048)
    with pytest.raises(ValueError, match=r"^DiMOO Sampler: canvas's width"):
        new(fake_model, canvas=big)
    assert seen == []


def test_ladr_policy_marks_its_expert_fields_advanced() -> None:
    """The V3 `advanced` flag (comfy_api Input(advanced=...), ComfyUI 0.33) on exactly the
    expert fields; the other fields and the preset stay in view."""
    from nodes.policy import EXPERT_FIELDS, LADRPolicyNode

    inputs = LADRPolicyNode.define_schema().inputs
    assert {i.id for i in inputs if i.advanced} == set(EXPERT_FIELDS)
    assert set(EXPERT_FIELDS) < {i.id for i in inputs} and inputs[0].id == "preset"


def test_every_node_that_chooses_a_rule_takes_the_typed_rule_socket() -> None:
    """The same socket everywhere: each node (deprecated and rule nodes aside) with a strategy widget of
    its own or a policy socket also takes the sampler's LADR_RULE socket `rule`; each node with
    an answer-rule widget takes the LADR_ANSWER_RULE socket `answer_rule` (nodes derived from
    the node list, not named)."""
    from nodes import node_classes
    from nodes.handles import ANSWER_RULE_TYPE, POLICY_TYPE, RULE_TYPE

    choosers, answerers = [], []
    for node in node_classes():
        schema = node.define_schema()
        made = {o.io_type for o in schema.outputs}
        if schema.is_deprecated or made & {RULE_TYPE, ANSWER_RULE_TYPE}:  # the rule nodes
            continue
        by_id = {i.id: i for i in schema.inputs}
        if "strategy" in by_id or any(i.io_type == POLICY_TYPE for i in schema.inputs):
            choosers.append(schema.node_id)
            assert by_id["rule"].io_type == RULE_TYPE and by_id["rule"].optional, schema.node_id
        if "rule" in by_id and by_id["rule"].io_type == "COMBO":  # an answer rule by name
            answerers.append(schema.node_id)
            spec = by_id["answer_rule"]
            assert (spec.io_type, spec.optional) == (ANSWER_RULE_TYPE, True), schema.node_id
    assert "LADR_DiMOOEdit" in choosers and {"LADR_DiMOOCaption", "LADR_DiMOOAsk"} <= set(
        answerers)
