"""DiMOO Edit node without ComfyUI (host fallbacks): runs the tiny random official-layout
checkpoint end to end and equals the Python API; refuses the built-in nano (trained for
text-to-image only) and each bad input with one message naming it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import ladr_core
from nodes import events, host
from nodes.decode import DiMOOVQDecode
from nodes.edit import DiMOOEdit
from nodes.handles import DiMOOModel

# size "as is": the tiny checkpoint's context holds 32 px images, not the official 512 px area
ARGS = dict(instruction="make the circle green", edit_type="edit", cfg=2.5, image_cfg=4.0,
            steps=8, temperature=1.0, seed=3, strategy="ladr", size="as is")


@pytest.fixture(scope="module")
def tiny(dimoo_checkpoint: Path) -> DiMOOModel:
    pipe = ladr_core.load_dimoo(dimoo_checkpoint, device="cpu", dtype=torch.float32)
    return DiMOOModel(pipe=pipe, key=("tiny",), name="tiny")


@pytest.fixture(autouse=True)
def quiet(monkeypatch) -> None:
    monkeypatch.setattr(host, "send_event", lambda e, p: None)


def _image(n: int = 1, h: int = 32, w: int = 32) -> torch.Tensor:
    rng = np.random.default_rng(0)
    return torch.from_numpy(rng.integers(0, 256, (n, h, w, 3), dtype=np.uint8)).float() / 255


def test_edit_node_equals_the_python_api_and_decodes(tiny: DiMOOModel) -> None:
    image = _image(2)
    tokens, stats = DiMOOEdit.execute(model=tiny, image=image, **ARGS).args
    ref = tiny.pipe.edit(ARGS["instruction"], steps=8, seed=3, strategy="ladr",
                             image=image, batch_size=2, decode=False, size="as is")
    assert torch.equal(tokens.tokens, ref.tokens) and tokens.grid == (8, 8)
    assert f"forward passes per image vs {ARGS['steps']} for the official sampler" in stats
    assert "; 2 images" in stats
    (out,) = DiMOOVQDecode.execute(model=tiny, tokens=tokens).args
    assert out.shape == (2, 32, 32, 3)


def test_edit_node_refuses_nano_on_the_model_input() -> None:
    nano = DiMOOModel(pipe=ladr_core.load_dimoo(ladr_core.nano_model_path(),
                                                dtype=torch.float32), key=("nano",), name="nano")
    with pytest.raises(ValueError, match=r"DiMOO Edit: model was trained for text to image only "
                                         r"\(its config.json says ladr_can_edit: false\) and "
                                         "cannot edit; load the Lumina-DiMOO checkpoint"):
        DiMOOEdit.execute(model=nano, image=_image(1, 48, 48), **ARGS)


def test_a_copy_of_nano_elsewhere_is_refused_too(tmp_path: Path, monkeypatch) -> None:
    """What the model can do comes from its own config.json, not from the folder it was
    loaded from: a copy under another name (as a user's models/lumina_dimoo/ would hold) is
    refused the same way, before anything runs."""
    import shutil

    copy = tmp_path / "my-dimoo"
    shutil.copytree(ladr_core.nano_model_path(), copy)
    model = DiMOOModel(pipe=ladr_core.load_dimoo(copy, dtype=torch.float32), key=("copy",),
                       name="my-dimoo")
    monkeypatch.setattr(model.pipe, "run", lambda *a, **k: pytest.fail("ran"))
    with pytest.raises(ValueError, match=r"^DiMOO Edit: model was trained for text to image"):
        DiMOOEdit.execute(model=model, image=_image(1, 48, 48), **ARGS)


@pytest.mark.parametrize(("kw", "needle"), [
    (dict(edit_type="recolour"), "DiMOO Edit: edit_type 'recolour' is not a known edit type; "
                                 "use one of edit, control, subject, style, pred, dense_canny"),
    (dict(instruction="   "), "DiMOO Edit: instruction is empty; .* write the edit"),
    (dict(image=_image(1, 30, 32)), r"DiMOO Edit: image height is 30 px, not a multiple of 4 "
                                    r"px .*; set size to 'official 512 px area', or resize or "
                                    r"crop it first"),
    (dict(cache=ladr_core.MLCacheConfig()), "DiMOO Edit: cache is set, but ML-Cache is not "
                                            "available for image editing; disconnect the "
                                            "ML-Cache Options node"),
    (dict(edit_type="multi_view_top"), "DiMOO Edit: edit_type 'multi_view_top' names the view "
                                       "'top', which is not offered; use one of multi_view_left"),
    (dict(edit_type="multiturn", instruction=" \n "), "DiMOO Edit: instruction is empty; edit "
                                                      "type 'multiturn' needs one"),
    (dict(edit_type="style"), "DiMOO Edit: style_image is not connected, but edit_type 'style' "
                              "needs it; connect the image whose style to copy"),
    (dict(style_image=_image()), "DiMOO Edit: style_image is connected, but edit_type 'edit' "
                                 "does not use it; set edit_type to style, or disconnect it"),
    (dict(edit_type="style", style_image=_image(1, 32, 30)),
     "DiMOO Edit: style_image width is 30 px, not a multiple of 4"),
    (dict(edit_type="style", image=_image(2), style_image=_image(3)),
     "DiMOO Edit: style_image is a batch of 3 for 2 images; give one style image, or one per"),
])
def test_edit_node_refuses_bad_input_naming_it(tiny: DiMOOModel, kw: dict, needle: str) -> None:
    args = {**ARGS, "image": _image(), **kw}
    with pytest.raises(ValueError, match=needle):
        DiMOOEdit.execute(model=tiny, **args)


def test_dense_types_need_no_instruction(tiny: DiMOOModel) -> None:
    tokens, _ = DiMOOEdit.execute(model=tiny, image=_image(),
                                  **{**ARGS, "instruction": "", "edit_type": "dense_depth",
                                     "steps": 2}).args
    assert tokens.tokens.shape == (1, 64)


def test_style_transfer_through_the_node_equals_the_python_api(tiny: DiMOOModel) -> None:
    content, style = _image(2), _image(1, 16, 32)
    tokens, _ = DiMOOEdit.execute(model=tiny, image=content, style_image=style,
                                  **{**ARGS, "instruction": "", "edit_type": "style"}).args
    ref = tiny.pipe.edit("", steps=8, seed=3, strategy="ladr", image=content,
                             style=style, edit_type="style", batch_size=2, decode=False, size="as is")
    assert torch.equal(tokens.tokens, ref.tokens) and tokens.grid == (4, 8)
    assert (tokens.width, tokens.height) == (32, 16)  # the style image's size, as official


def test_official_size_brings_each_image_to_its_bucket(tiny: DiMOOModel, monkeypatch) -> None:
    """size 'official 512 px area' (the default): any image size is accepted and the library
    brings each image to its official bucket (the tiny context cannot run those, so the check
    is stopped there), as pipe.edit(size="official") does from Python."""
    from ladr_core.dimoo import jobs
    from ladr_core.dimoo.tasks.edit_size import pick_bucket

    seen: dict = {}

    class Reached(Exception):
        pass

    def plan(encode, factor, context, prompts, image, edit_type, batch, style, note):
        seen.update(image=image, style=style, note=note)
        raise Reached

    monkeypatch.setattr(jobs, "plan_edit", plan)
    with pytest.raises(Reached):
        DiMOOEdit.execute(model=tiny, image=_image(1, 300, 401), style_image=_image(1, 64, 64),
                          **{**ARGS, "edit_type": "style", "size": "official 512 px area"})
    w, h = pick_bucket(401, 300)
    assert tuple(seen["image"].shape) == (1, h, w, 3) and w * h <= 512 * 512
    assert tuple(seen["style"].shape) == (1, 512, 512, 3)
    assert f"image 401x300 -> {w}x{h} (official 512 px area)" in seen["note"]
    python = {}
    with pytest.raises(Reached):
        tiny.pipe.edit("", _image(1, 300, 401), edit_type="style", style=_image(1, 64, 64))
    python.update(seen)
    assert torch.equal(python["image"], seen["image"])  # the default size is the official one
    monkeypatch.undo()
    with pytest.raises(ValueError, match="DiMOO Edit: image width is 401 px, not a multiple of "
                                         "4.*; set size to 'official 512 px area'"):
        DiMOOEdit.execute(model=tiny, image=_image(1, 300, 401), **ARGS)
    with pytest.raises(ValueError, match="DiMOO Edit: size 'huge' is not a size choice"):
        DiMOOEdit.execute(model=tiny, image=_image(), **{**ARGS, "size": "huge"})


def test_the_node_offers_every_edit_type_and_its_help_page_names_each() -> None:
    from ladr_core.dimoo import EDIT_TYPES

    (spec,) = [i for i in DiMOOEdit.define_schema().inputs if i.id == "edit_type"]
    assert list(spec.options) == list(EDIT_TYPES)
    page = (Path(__file__).parents[2] / "web" / "docs" / "LADR_DiMOOEdit" / "en.md").read_text()
    assert [t for t in EDIT_TYPES if f"`{t}`" not in page] == []


@pytest.mark.parametrize("edit_type", ["multi_view_back", "multiturn"])
def test_multi_view_and_multiturn_through_the_node_equal_the_python_api(
        tiny: DiMOOModel, edit_type: str) -> None:
    text = "make the circle green\nadd a yellow star" if edit_type == "multiturn" else ""
    tokens, stats = DiMOOEdit.execute(model=tiny, image=_image(2), **{
        **ARGS, "instruction": text, "edit_type": edit_type}).args
    ref = tiny.pipe.edit(text, _image(2), edit_type=edit_type, steps=8, seed=3, strategy="ladr",
                         batch_size=2, decode=False, size="as is")
    assert torch.equal(tokens.tokens, ref.tokens) and tokens.grid == (8, 8)
    steps = ARGS["steps"]
    if edit_type == "multiturn":  # both turns counted, against the official sampler's two runs
        assert ref.turns == 2 and f"vs {2 * steps} for the official sampler ({steps} steps, 2 " \
            f"turns of 64 tokens)" in stats and f"of {2 * steps} planned steps" in stats


@pytest.mark.parametrize("turns", [1, 3])
def test_the_progress_bar_spans_every_turn(tiny: DiMOOModel, sent, turns: int) -> None:
    """A multi-turn edit runs its turns one after the other: the progress the events carry
    rises through all of them (it restarted at 0 with each turn) and the events say the turn."""
    text = "\n".join(["make the circle green", "add a yellow star", "make it blue"][:turns])
    DiMOOEdit.execute(model=tiny, image=_image(1), **{
        **ARGS, "instruction": text, "edit_type": "multiturn" if turns > 1 else "edit"})
    steps = [p for e, p in sent if e == events.EVENT and "progress" in p]
    progress = [p["progress"] for p in steps]
    assert progress == sorted(progress) and progress[-1] == 1.0, progress
    assert [p["turn"] for p in steps] == sorted(p["turn"] for p in steps)
    assert {p["turn"] for p in steps} == set(range(1, turns + 1))
    assert {p["turns"] for p in steps} == {turns}
    for turn in range(1, turns + 1):  # each turn ends at its share of the bar
        assert max(p["progress"] for p in steps if p["turn"] == turn) == pytest.approx(turn / turns)


def test_the_rule_socket_runs_what_the_sampler_would(tiny: DiMOOModel) -> None:
    """DiMOO Edit's `rule` is the sampler's LADR_RULE socket: a DiMOO Sampling Rule's strategy
    (here one the strategy widget cannot set: threshold at tau 0.5) runs the edit, as the
    Python API runs that strategy object; the strategy widget is then not read."""
    from nodes.rules import RuleFields, SamplingRuleNode

    (rule,) = SamplingRuleNode.execute(strategy="threshold", tau=0.5, gamma=-1.0,
                                       token="sample").args
    image = _image(1)
    tokens, _ = DiMOOEdit.execute(model=tiny, image=image, rule=rule,
                                  **{**ARGS, "strategy": "baseline"}).args
    ref = tiny.pipe.edit(ARGS["instruction"], steps=8, seed=3, image=image, decode=False,
                         strategy=RuleFields(tau=0.5).strategy("threshold"), size="as is")
    assert torch.equal(tokens.tokens, ref.tokens)


def test_a_policy_beside_the_rule_socket_is_refused_naming_policy(tiny: DiMOOModel) -> None:
    from nodes.handles import SamplingRule

    with pytest.raises(ValueError, match=r"^DiMOO Edit: policy is connected together with rule"):
        DiMOOEdit.execute(model=tiny, image=_image(1), rule=SamplingRule(ladr_core.Baseline()),
                          policy=ladr_core.LADR(), **ARGS)
    with pytest.raises(ValueError, match=r"^rule: got a builtins.str, not this version's "
                       "sampling rule"):
        DiMOOEdit.execute(model=tiny, image=_image(1), rule="ladr", **ARGS)
