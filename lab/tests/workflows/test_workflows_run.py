"""Every API workflow's sampler settings run on the shipped nano model through the nodes
themselves, in process (lab/workflows/thumbnails.py `run_samplers`, tests/kit/run_graph.py): linked
rule, canvas, policy and cache nodes build their values, the strategy the rule names runs. The edit workflow's DiMOO Edit
settings run through the node on the tiny random checkpoint in the official layout (nano
cannot edit). Executing the graphs themselves is tests/host/test_comfyui_integration.py and
tests/host/test_comfyui_painting.py, on a real ComfyUI server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import ladr_core
from lab.workflows.thumbnails import built_in_path, run_samplers

ROOT = Path(__file__).resolve().parents[3]
API = sorted((ROOT / "example_workflows" / "api").glob("*.json"))
_PIPES: dict[Path, object] = {}


def test_every_api_workflow_is_run_here() -> None:
    assert all('"LADR_DiMOOSampler2"' in p.read_text() or '"LADR_DiMOOEdit"' in p.read_text()
               for p in API)


@pytest.mark.parametrize("path", [p for p in API if '"LADR_DiMOOSampler2"' in p.read_text()],
                         ids=lambda p: p.stem)
def test_api_workflow_settings_run_on_nano(path: Path) -> None:
    """On the built-in nano the loader names (the real-model templates: the nano that draws)."""
    wf = json.loads(path.read_text())
    folder = built_in_path(wf)
    if folder not in _PIPES:
        _PIPES[folder] = ladr_core.load_dimoo(folder, dtype=torch.float32)
    samplers = [n["inputs"] for n in wf.values() if n["class_type"] == "LADR_DiMOOSampler2"]
    for kw in samplers:  # few steps (the preset's own T still applies)
        kw.update(steps=min(kw["steps"], 8))
    canvases = {k: n["inputs"] for k, n in wf.items() if n["class_type"] == "LADR_Canvas"}
    for kw in canvases.values():  # nano's size
        kw.update(width=48, height=48)
    runs = run_samplers(wf, _PIPES[folder])
    assert len(runs) == len(samplers) >= 1
    for (images, text, _), kw in zip(runs, samplers, strict=True):
        prompt = kw["prompt"]  # a link: DiMOO Caption's caption of one picture, one line
        lines = prompt.strip().splitlines() if isinstance(prompt, str) else ["caption"]
        n_prompts = len(lines) if kw["one_prompt_per_line"] else 1
        canvas = wf[kw["canvas"][0]]["inputs"]
        batch = canvas["batch_size"]
        assert images.shape == (n_prompts * batch, 48, 48, 3)
        assert text.startswith(wf[kw["rule"][0]]["inputs"]["strategy"] + ": ")


@pytest.mark.parametrize("path", [p for p in API if '"LADR_DiMOOEdit"' in p.read_text()],
                         ids=lambda p: p.stem)
def test_edit_workflow_settings_run_on_the_tiny_checkpoint(path: Path, dimoo_checkpoint: Path,
                                                           monkeypatch) -> None:
    """The shipped widget values and policy go through DiMOO Edit on the tiny random checkpoint
    (its context holds a 32 x 32 px reference: the shipped picture resized to that)."""
    from lab.workflows.thumbnails import _source
    from nodes import DiMOOEdit, DiMOOModel, host
    from tests.kit.run_graph import run_node

    monkeypatch.setattr(host, "send_event", lambda e, p: None)
    pipe = ladr_core.load_dimoo(dimoo_checkpoint, device="cpu", dtype=torch.float32)
    model = DiMOOModel(pipe=pipe, key=("tiny",), name="tiny")
    wf = json.loads(path.read_text())
    for node in (n for n in wf.values() if n["class_type"] == "LADR_DiMOOEdit"):
        kw = dict(node["inputs"])
        picture = _source(wf, kw.pop("image"))[0]
        assert picture.shape[1:3] == (512, 512)  # the official editing area
        small = torch.nn.functional.interpolate(picture.permute(0, 3, 1, 2), size=(32, 32),
                                                mode="area").permute(0, 2, 3, 1)
        policy = run_node(wf, kw.pop("policy")[0], model, {})[0] if "policy" in kw else None
        kw.pop("model")
        assert kw["size"] == "official 512 px area"  # the shipped choice; the tiny context
        tokens, stats = DiMOOEdit.execute(model=model, image=small, policy=policy,  # needs 32 px
                                          **{**kw, "steps": min(kw["steps"], 8),
                                             "size": "as is"}).args
        assert tokens.grid == (8, 8) and stats.startswith(kw["strategy"] + ": ")


def test_a_thumbnail_labels_every_picture_in_the_singular_where_it_is_one() -> None:
    """Before, the image-to-image card (4 runs) named passes for 2 of its 4 pictures and said
    "1 passes"; each run's count is now on the card, in the pictures' order."""
    from lab.workflows.thumbnails import passes, run_lines

    runs = [(None, f"ladr: {passes(n)}", {"strategy": "ladr", "nfe": n,
                                          "official_nfe_per_image": o})
            for n, o in ((8, 64), (1, 16), (3, 32), (5, 48))]
    assert run_lines(runs) == ["ladr: 8, 1, 3, 5 passes", "official: 64, 16, 32, 48"]
    assert run_lines(runs[:2]) == ["ladr: 8 passes", "ladr: 1 pass"]
