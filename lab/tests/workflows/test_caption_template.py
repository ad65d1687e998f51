"""The caption template as shipped (example_workflows/api/ladr_nano_caption_to_image.json, built
by lab/workflows/build_examples.py), run in this process through the nodes' own ``execute``
(tests/kit/run_graph.py): DiMOO Caption's caption is the library's answer for the loaded
picture, and it reaches DiMOO Sampler as its prompt (the sampler's tokens equal a run given the
caption as typed text). On the tiny fixture checkpoint (any checkout); with the built-in nano
that answers, the caption also describes the scene the picture shows (lab.nano.questions).
Queuing it in a real ComfyUI is tests/host/test_comfyui_understand.py; its picture held to the
evaluator, lab/tests/workflows/test_templates_pass.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from support import ROOT

import ladr_core
from lab.workflows import build_examples
from nodes import CAPTION_QUESTION, DiMOOModel, one_line
from tests.kit.run_graph import load_image, run_node

TEMPLATE = ROOT / "example_workflows" / "api" / "ladr_nano_caption_to_image.json"


def _key(wf: dict, kind: str) -> str:
    (key,) = [k for k, n in wf.items() if n["class_type"] == kind]
    return key


def _caption_expected(pipe: object, wf: dict) -> str:
    """The library's caption of the template's picture with the template's settings."""
    kw = wf[_key(wf, "LADR_DiMOOCaption")]["inputs"]
    image = load_image(wf[kw["image"][0]]["inputs"]["image"])[0]
    res = pipe.understand(image, CAPTION_QUESTION, max_answer=kw["max_answer"] or None,
                          rule=kw["rule"], temperature=kw["temperature"], seed=kw["seed"],
                          size=kw["size"])
    return "\n".join(one_line(t) for t in res.text)


def test_the_caption_is_the_samplers_prompt(dimoo_checkpoint: Path, sent) -> None:
    from nodes import DiMOOSampler

    pipe = ladr_core.load_dimoo(dimoo_checkpoint, dtype=torch.float32)
    model = DiMOOModel(pipe=pipe, key=("tiny",), name="tiny")
    wf = json.loads(TEMPLATE.read_text())
    sampler = _key(wf, "LADR_DiMOOSampler2")
    wf[_key(wf, "LADR_Canvas")]["inputs"].update(width=32, height=32)  # the tiny context
    wf[sampler]["inputs"].update(steps=8)
    done: dict[str, tuple] = {}
    tokens, _ = run_node(wf, sampler, model, done)
    caption = done[_key(wf, "LADR_DiMOOCaption")][0]
    assert caption.strip() and caption == _caption_expected(pipe, wf)
    kw = {k: (done[str(v[0])][v[1]] if isinstance(v, list) else v)
          for k, v in wf[sampler]["inputs"].items()}
    assert kw.pop("prompt") == caption
    typed, _ = DiMOOSampler.execute(**kw, prompt=str(caption)).args
    assert torch.equal(tokens.tokens, typed.tokens)


def test_the_template_captions_on_the_nano_that_answers() -> None:
    wf = json.loads(TEMPLATE.read_text())
    assert wf[_key(wf, "LADR_LoadDiMOOModel")]["inputs"]["model_name"] == build_examples.NANO_MMU
    caption = wf[_key(wf, "LADR_DiMOOCaption")]["inputs"]
    assert {k: caption[k] for k in build_examples.CAPTION_SETTINGS} == \
        build_examples.CAPTION_SETTINGS


@pytest.mark.skipif(not (ladr_core.nano_mmu_model_path() / "config.json").is_file(),
                    reason="the built-in nano that answers is not in this checkout")
def test_on_the_nano_that_answers_the_caption_describes_the_scene(sent) -> None:
    from lab.nano import questions

    pipe = ladr_core.load_dimoo(ladr_core.nano_mmu_model_path(), dtype=torch.float32)
    model = DiMOOModel(pipe=pipe, key=("nano-mmu",), name="nano-mmu")
    wf = json.loads(TEMPLATE.read_text())
    (caption, stats) = run_node(wf, _key(wf, "LADR_DiMOOCaption"), model, {})
    assert caption == _caption_expected(pipe, wf)
    truth = questions.Question("caption", CAPTION_QUESTION,
                               questions.describe(build_examples.scene_objects()))
    assert questions.is_correct(truth, caption, build_examples.scene_objects()), (caption, stats)
