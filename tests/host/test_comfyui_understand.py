"""DiMOO Caption and DiMOO Ask in a REAL ComfyUI 0.33 server (skipped without COMFYUI_PATH):
graphs queued over HTTP, answers read from Preview Any in /history, the progress bar from the
websocket. On the tiny fixture checkpoint (it answers: its config does not say it cannot): a
run with its progress; an empty question refused at validation on `question` alone; the nano
that only draws, and an answer length off the blocks, refused when the node runs with one
message naming the input while the server keeps serving. With the built-in nano that answers
(dimoo-nano-mmu): the caption template as shipped (its caption the sampler's prompt: the saved
picture shows what the caption says) and Cancel in the middle of an answer."""

from __future__ import annotations

import json
import os
import re

import pytest
from support import ROOT
from support.comfy_server import http, run_workflow

from nodes.loader import NANO, NANO_MMU

pytestmark = [pytest.mark.comfyui,
              pytest.mark.skipif(not os.environ.get("COMFYUI_PATH"),
                                 reason="set COMFYUI_PATH to a ComfyUI checkout")]
MMU_READY = (ROOT / "ladr_core" / "assets" / "dimoo_nano_mmu" / "config.json").is_file()
needs_mmu = pytest.mark.skipif(not MMU_READY, reason="needs the built-in nano that answers")
TEMPLATE = ROOT / "example_workflows" / "api" / "ladr_nano_caption_to_image.json"
SCENE = "ladr_caption_scene.png"  # an example input the pack copies into input/ on load


def ask_workflow(model_name: str = "tiny-fixture", question: str = "what color is it?",
                 **widgets) -> dict:
    """Load DiMOO Model -> DiMOO Ask (Load Image's picture) -> Preview Any."""
    ask = {"question": question, "rule": "official", "max_answer": 16, "temperature": 0.0,
           "seed": 0, "size": "official", **widgets, "model": ["1", 0], "image": ["2", 0]}
    return {"1": {"class_type": "LADR_LoadDiMOOModel",
                  "inputs": {"model_name": model_name, "dtype": "fp32"}},
            "2": {"class_type": "LoadImage", "inputs": {"image": SCENE}},
            "3": {"class_type": "LADR_DiMOOAsk", "inputs": ask},
            "4": {"class_type": "PreviewAny", "inputs": {"source": ["3", 0]}},
            "5": {"class_type": "PreviewAny", "inputs": {"source": ["3", 1]}}}


def _text(port: int, pid: str, node: str) -> str:
    _, hist = http(port, f"/history/{pid}")
    return hist[pid]["outputs"][node]["text"][0]


def _errors(msgs: list[dict]) -> list[dict]:
    return [m["data"] for m in msgs if m["type"] == "execution_error"]


def test_an_answer_runs_with_its_progress_bar(server) -> None:
    port, _ = server
    pid, msgs = run_workflow(port, ask_workflow(seed=1))
    assert not _errors(msgs), msgs[-1]
    bar = [m["data"] for m in msgs if m["type"] == "progress" and m["data"]["node"] == "3"]
    assert bar and bar[-1]["value"] == bar[-1]["max"]
    assert [b["value"] for b in bar] == sorted(b["value"] for b in bar)
    assert "\n" not in _text(port, pid, "4")  # one picture, one line
    # the official order without a stop in the block: the official count of forwards
    assert re.match(r"official: (\d+) forwards per answer \(official order: \1\)",
                    _text(port, pid, "5")), _text(port, pid, "5")


def test_an_empty_question_is_refused_at_validation_on_question(server) -> None:
    port, _ = server
    status, body = http(port, "/prompt", {"prompt": ask_workflow(question="  ")})
    assert status == 400
    errors = body["node_errors"]["3"]["errors"]
    assert [e["extra_info"]["input_name"] for e in errors] == ["question"], errors
    assert "question is empty" in json.dumps(errors)


@pytest.mark.parametrize(("widgets", "needle"), [
    ({"model_name": NANO}, "DiMOO Ask: model cannot answer questions about images"),
    ({"max_answer": 300}, "DiMOO Ask: max_answer=300 is not a multiple of block_length (256); "
                          "nearest valid max_answer: 256 or 512"),
])
def test_a_mistake_found_at_run_is_one_message_and_the_server_keeps_going(server, widgets,
                                                                         needle) -> None:
    port, _ = server
    name = widgets.pop("model_name", "tiny-fixture")
    _, msgs = run_workflow(port, ask_workflow(name, seed=2, **widgets))
    (error,) = _errors(msgs)
    assert error["node_id"] == "3" and error["exception_message"].startswith(needle), error
    pid, msgs = run_workflow(port, ask_workflow(seed=3))
    assert not _errors(msgs) and _text(port, pid, "4") is not None


def test_the_caption_templates_graph_runs_its_caption_into_the_sampler(server) -> None:
    """The template's graph on the fixture checkpoint (its size and a short run): the link
    from DiMOO Caption's caption into DiMOO Sampler's prompt widget validates and runs, one
    picture per caption line."""
    port, _ = server
    wf = json.loads(TEMPLATE.read_text())
    for node in wf.values():
        kind, kw = node["class_type"], node["inputs"]
        if kind == "LADR_LoadDiMOOModel":
            kw["model_name"] = "tiny-fixture"
        if kind == "LADR_Canvas":
            kw.update(width=32, height=32)
        if kind == "LADR_DiMOOSampler2":
            kw.update(steps=8, seed=4321)
            assert kw["prompt"][0] in wf and kw["one_prompt_per_line"]
    pid, msgs = run_workflow(port, wf)
    assert not _errors(msgs), msgs[-1]
    _, hist = http(port, f"/history/{pid}")
    save = next(k for k, n in wf.items() if n["class_type"] == "SaveImage")
    caption = next(k for k, n in wf.items() if n["class_type"] == "LADR_DiMOOCaption")
    shown = next(k for k, n in wf.items() if n["class_type"] == "PreviewAny"
                 and n["inputs"]["source"] == [caption, 0])
    lines = _text(port, pid, shown).splitlines()
    assert len(hist[pid]["outputs"][save]["images"]) == len(lines) == 1


@needs_mmu
def test_cancel_mid_answer_then_the_next_run_equals_a_fresh_one(server) -> None:
    port, _ = server
    wf = ask_workflow(NANO_MMU, "describe the image.", max_answer=256, seed=77)

    def cancel_on_progress(m: dict) -> None:
        if m["type"] == "progress" and m["data"]["node"] == "3" and m["data"]["value"] > 0:
            http(port, "/interrupt", {})

    _, msgs = run_workflow(port, wf, cancel_on_progress)
    assert msgs[-1]["type"] == "execution_interrupted"
    pid_a, msgs_a = run_workflow(port, wf)
    wf["3"]["inputs"]["seed"] = 78  # greedy: the same answer, but not a cached output
    pid_b, msgs_b = run_workflow(port, wf)
    assert not _errors(msgs_a) and not _errors(msgs_b)
    assert _text(port, pid_a, "4") == _text(port, pid_b, "4")


def test_the_answer_rule_socket_runs_its_rule_over_the_rule_widget(server) -> None:
    """DiMOO Answer Rule -> DiMOO Ask's typed answer_rule socket (LADR_ANSWER_RULE): the live
    host links and runs it, and the stats line names the connected rule, not the widget's."""
    port, _ = server
    wf = ask_workflow()
    wf["6"] = {"class_type": "LADR_AnswerRule",
               "inputs": {"rule": "threshold", "tau": 0.5, "gamma": -1.0, "stop": True}}
    wf["3"]["inputs"]["answer_rule"] = ["6", 0]
    pid, msgs = run_workflow(port, wf)
    assert not _errors(msgs), msgs[-1]
    assert _text(port, pid, "5").startswith("threshold+stop: "), _text(port, pid, "5")
