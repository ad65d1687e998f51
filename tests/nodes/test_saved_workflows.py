"""Workflows saved by an earlier version of the pack (tests/saved_workflows/: the examples as
shipped before the templates were renamed and got their 5x views) still match every node's
schema: the same node types and input names, widget values in range, and each API workflow
the conversion of its UI twin. Queuing them in a real ComfyUI is
tests/host/test_comfyui_saved_workflows.py; loading one in the real frontend is
tests/web/test_web_frontend_views.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import ROOT
from support.workflows import UI_ONLY, WIDGETS, check_ui_workflow, check_value, schemas, ui_to_api

pytestmark = pytest.mark.usefixtures("real_model_installed")
SAVED = ROOT / "tests" / "saved_workflows"
UI = sorted((SAVED / "ui").glob("*.json"))
API = sorted((SAVED / "api").glob("*.json"))


def test_the_earlier_examples_are_all_here() -> None:
    assert len(UI) == len(API) == 8 and [p.name for p in UI] == [p.name for p in API]


@pytest.mark.parametrize("path", UI, ids=lambda p: p.stem)
def test_saved_ui_workflow_matches_todays_schemas(path: Path) -> None:
    check_ui_workflow(path)


@pytest.mark.parametrize("path", API, ids=lambda p: p.stem)
def test_saved_api_workflow_matches_todays_schemas(path: Path) -> None:
    api = json.loads(path.read_text())
    ui = json.loads((SAVED / "ui" / path.name).read_text())
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
