"""Every API workflow EXECUTED host-free (workflows/run_local.py): our nodes for real, the three
core nodes as stand-ins. Runs on the fixture checkpoint (sizes/steps shrunk to its 256-token
context) so it always runs; the real-server run of the same files is the integration test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from nodes import loader
from workflows import run_local

ROOT = Path(__file__).resolve().parents[1]
API = sorted((ROOT / "workflows" / "api").glob("*.json"))


@pytest.fixture
def fixture_models(dimoo_checkpoint: Path, monkeypatch) -> str:
    monkeypatch.setenv("LADR_MODELS_DIR", str(dimoo_checkpoint.parent))
    loader._CACHE.clear()
    return dimoo_checkpoint.name


@pytest.mark.parametrize("path", API, ids=lambda p: p.stem)
def test_api_workflow_executes(path: Path, fixture_models: str) -> None:
    wf = json.loads(path.read_text())
    out = run_local.run(wf, overrides={
        "LADR_LoadDiMOOModel": {"model_name": fixture_models, "dtype": "fp32"},
        "LADR_DiMOOSampler": {"width": 32, "height": 32, "steps": 8},
    })
    samplers = [k for k, n in wf.items() if n["class_type"] == "LADR_DiMOOSampler"]
    per_line = wf[samplers[0]]["inputs"]["one_prompt_per_line"]
    n_prompts = len(wf[samplers[0]]["inputs"]["prompt"].strip().splitlines()) if per_line else 1
    for k, node in wf.items():
        if node["class_type"] == "SaveImage":
            images = out[k][0]
            width = 32 * 2 + 2 if "ImageStitch" in json.dumps(wf) else 32
            assert images.shape == (n_prompts, 32, width, 3) and images.dtype == torch.float32
        if node["class_type"] == "PreviewAny":
            src = node["inputs"]["source"][0]
            assert out[k][0].startswith(wf[src]["inputs"]["strategy"] + ": ")
