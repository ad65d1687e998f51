"""What a user sees on the sampler/loader/cache nodes: one message per mistake, on its input;
defaults that run on the connected checkpoint; widget values shown as they are stored."""

from __future__ import annotations

import math

import pytest
import torch

import ladr_core
from nodes import node_classes, validate
from nodes.cache import MLCacheOptions
from nodes.decode import DiMOOVQDecode
from nodes.handles import DiMOOModel
from nodes.sampler_legacy import LegacyDiMOOSampler


@pytest.mark.parametrize("node", node_classes(), ids=lambda n: n.__name__)
def test_validate_inputs_names_at_most_one_input(node) -> None:
    """ComfyUI attaches a validate_inputs failure to every input it names (nodes/validate.py)."""
    attached = validate.attached_inputs(node)
    assert attached is not None, node  # never **kwargs: that would name every input
    if node.__name__ == "CanvasNode":  # the one exception (nodes/validate.py rule 2)
        assert attached == ["width", "height"], attached
        return
    assert len(attached) <= 1, attached


def test_attached_inputs_reads_the_signature_like_comfyui() -> None:
    class Four:
        @classmethod
        def validate_inputs(cls, prompt, width, height, one_prompt_per_line):
            return "bad"

    class Kw:
        @classmethod
        def validate_inputs(cls, **kwargs):
            return True

    assert validate.attached_inputs(Four) == ["prompt", "width", "height",
                                              "one_prompt_per_line"]
    assert validate.attached_inputs(Kw) is None


def _shown(value: float, step: float) -> str:
    """ComfyUI frontend 1.49 useFloatWidget: precision = max(0, -floor(log10(step)))."""
    return f"{value:.{max(0, -math.floor(math.log10(step)))}f}"


@pytest.mark.frontend_version("1.49")  # its FLOAT widget's display precision rule
@pytest.mark.parametrize("node", [LegacyDiMOOSampler, MLCacheOptions], ids=lambda n: n.__name__)
def test_float_widgets_show_their_defaults_and_documented_values(node) -> None:
    shown_values = {"cfg": [0.75, 4.0, 1.25]}  # nano default, official, a tuned value
    for inp in node.define_schema().inputs:
        if not isinstance(getattr(inp, "default", None), float):  # the FLOAT widgets
            continue
        for value in [inp.default, *shown_values.get(inp.id, [])]:
            assert float(_shown(value, inp.step)) == value, (inp.id, value, inp.step)


def _schema_defaults(node) -> dict:
    inputs = node.define_schema().inputs  # sockets (Custom, IMAGE, ...) have no default
    return {i.id: i.default for i in inputs if getattr(i, "default", None) is not None}


@pytest.fixture(scope="module")
def nano() -> DiMOOModel:
    if not (ladr_core.nano_model_path() / "model.safetensors").is_file():
        pytest.skip("DiMOO-nano checkpoint not shipped in this checkout")
    pipe = ladr_core.load_dimoo(ladr_core.nano_model_path(), dtype=torch.float32)
    return DiMOOModel(pipe=pipe, key=("nano",), name="nano")


def test_a_fresh_sampler_node_runs_on_the_builtin_model(nano, monkeypatch) -> None:
    """Defaults 'auto' (0 px, cfg -1) mean the checkpoint's default_size and default_cfg."""
    seen: list[dict] = []
    real = nano.pipe.prepare_text
    monkeypatch.setattr(nano.pipe, "prepare_text",
                        lambda *a, **kw: seen.append(kw) or real(*a, **kw))
    args = {**_schema_defaults(LegacyDiMOOSampler), "steps": 16}
    tokens, _ = LegacyDiMOOSampler.execute(model=nano, **args).args
    assert (seen[0]["width"], seen[0]["height"], seen[0]["cfg"]) == (None, None, None)
    assert (tokens.width, tokens.height) == (nano.pipe.default_size,) * 2 == (48, 48)
    (image,) = DiMOOVQDecode.execute(model=nano, tokens=tokens).args
    assert image.shape == (1, 48, 48, 3)


def test_stored_values_of_old_workflows_keep_their_meaning(nano, monkeypatch) -> None:
    seen: list[dict] = []

    class Seen(Exception):
        pass

    def record(*a, **kw):
        seen.append(kw)
        raise Seen

    monkeypatch.setattr(nano.pipe, "prepare_text", record)
    args = {**_schema_defaults(LegacyDiMOOSampler), "width": 32, "height": 48, "cfg": 4.0}
    with pytest.raises(Seen):
        LegacyDiMOOSampler.execute(model=nano, **args)
    assert (seen[0]["width"], seen[0]["height"], seen[0]["cfg"]) == (32, 48, 4.0)


def test_ladr_num_threads_applies_while_sampling_and_is_restored(nano, monkeypatch) -> None:
    from nodes import threads

    model = nano
    before = torch.get_num_threads()
    wanted = 1 if before != 1 else 2
    seen: list[int] = []
    real = model.pipe.run
    monkeypatch.setattr(model.pipe, "run",
                        lambda *a, **kw: seen.append(torch.get_num_threads()) or real(*a, **kw))
    monkeypatch.setenv(threads.ENV, str(wanted))
    args = {**_schema_defaults(LegacyDiMOOSampler), "steps": 4}
    LegacyDiMOOSampler.execute(model=model, **args)
    assert seen == [wanted] and torch.get_num_threads() == before
    monkeypatch.setenv(threads.ENV, "0")
    with pytest.raises(ValueError, match="LADR_NUM_THREADS='0' must be a whole number >= 1"):
        LegacyDiMOOSampler.execute(model=model, **args)
    monkeypatch.delenv(threads.ENV)
    LegacyDiMOOSampler.execute(model=model, **args)
    assert seen[-1] == before


def test_nan_in_a_float_widget_is_refused_naming_the_widget() -> None:
    """A workflow file can carry NaN, which passes the host's min/max: refused naming the
    widget (not the policy's field), even where the preset or strategy would not read it
    (tests/host/test_workflow_fuzz.py found these)."""
    from support.nodes import policy_fields

    from nodes.policy import LADRPolicyNode, ProphetPolicyNode
    from nodes.rules import SamplingRuleNode

    nan = float("nan")
    calls = [
        (lambda: ProphetPolicyNode.execute(threshold_early=7.5, threshold_middle=5.0,
                                           threshold_late=2.5, middle_start=nan, late_start=0.6),
         "Prophet Policy: middle_start is NaN"),
        (lambda: LADRPolicyNode.execute(preset="paper", **policy_fields(tau_structure=nan)),
         "LADR Policy: tau_structure is NaN"),
        (lambda: MLCacheOptions.execute(cache_ratio=0.5, warmup_ratio=nan, refresh_interval=3,
                                        preset="ladr"), "ML-Cache Options: warmup_ratio is NaN"),
        (lambda: SamplingRuleNode.execute(strategy="ladr-global", tau=-1.0, gamma=nan,
                                          token="sample"), "DiMOO Sampling Rule: gamma is NaN"),
    ]
    for call, message in calls:
        with pytest.raises(ValueError, match=message + r".*; set it to a number"):
            call()


def test_validate_inputs_of_a_combo_takes_any_value_a_workflow_file_holds() -> None:
    """A combo named in validate_inputs skips the host's own list check: a null, a number or
    an object gets the node's message naming it; an absent input (the host reports it
    missing) is not a second message."""
    from nodes.loader import LoadDiMOOModel
    from nodes.policy import LADRPolicyNode

    for value in (None, 7, {"a": 1}, [1, 2]):
        assert LoadDiMOOModel.validate_inputs(model_name=value).startswith(
            f"model_name: {value!r} is not a model name")
        assert "preset" in LADRPolicyNode.validate_inputs(preset=value)
    assert LoadDiMOOModel.validate_inputs() is True and LADRPolicyNode.validate_inputs() is True
