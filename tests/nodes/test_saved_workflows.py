"""Workflows saved by earlier versions of the pack (tests/saved_workflows/<version>/: the
examples as each version shipped them) still match every node's schema: the same node types and
input names, widget values in range, and each API workflow the conversion of its UI twin. The
nano ones saved by 3e0f2f1 (the last version whose DiMOO Sampler took its rule and canvas as
widgets) sample the tokens they sampled then (tokens.json, recorded by that version in this
process on CPU, tests/kit/run_graph.py). Queuing them in a real ComfyUI is tests/host/test_comfyui_saved_workflows.py;
loading one in the real frontend is tests/web/test_web_frontend_views.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import ROOT
from support.workflows import UI_ONLY, WIDGETS, check_ui_workflow, check_value, schemas, ui_to_api

from tests.kit.run_graph import run_samplers

pytestmark = pytest.mark.usefixtures("real_model_installed")
SAVED = ROOT / "tests" / "saved_workflows"
VERSIONS = sorted(p.name for p in SAVED.iterdir() if p.is_dir())
UI = sorted(SAVED.glob("*/ui/*.json"))
API = sorted(SAVED.glob("*/api/*.json"))
TOKENS = SAVED / "3e0f2f1" / "tokens.json"


def _id(path: Path) -> str:
    return f"{path.parents[1].name}-{path.stem}"


def test_the_earlier_examples_are_all_here() -> None:
    assert len(VERSIONS) >= 2
    for version in VERSIONS:
        ui, api = (sorted(p.name for p in (SAVED / version / k).glob("*.json"))
                   for k in ("ui", "api"))
        assert len(ui) == 8 and ui == api, version


@pytest.mark.parametrize("path", UI, ids=_id)
def test_saved_ui_workflow_matches_todays_schemas(path: Path) -> None:
    check_ui_workflow(path)


@pytest.mark.parametrize("path", API, ids=_id)
def test_saved_api_workflow_matches_todays_schemas(path: Path) -> None:
    api = json.loads(path.read_text())
    ui = json.loads((path.parents[1] / "ui" / path.name).read_text())
    assert {k: {"class_type": v["class_type"], "inputs": v["inputs"]} for k, v in api.items()} \
        == ui_to_api(ui)
    sch = schemas()
    for key, node in api.items():
        for spec in sch[node["class_type"]][0]:
            if spec.io_type == UI_ONLY:
                continue
            value = node["inputs"].get(spec.id)
            given = spec.id in node["inputs"] or not spec.optional  # later inputs: optional
            if spec.io_type in WIDGETS and given and not isinstance(value, list):
                check_value(f"{path.stem} {key}.{spec.id}", spec, node["inputs"][spec.id])


@pytest.mark.committed_result("tests/saved_workflows/3e0f2f1/tokens.json")
@pytest.mark.parametrize("name", sorted(json.loads(TOKENS.read_text())))
def test_saved_nano_workflow_samples_the_tokens_it_sampled_then(fake_model, sent, name) -> None:
    """The nano workflows 3e0f2f1 shipped, run through today's nodes in this process, give
    every sampler node the tokens that version gave it (float32, CPU)."""
    wf = json.loads((SAVED / "3e0f2f1" / "api" / f"{name}.json").read_text())
    tokens = {k: out[0].tokens.tolist() for k, out in run_samplers(wf, fake_model).items()}
    assert tokens == json.loads(TOKENS.read_text())[name]
