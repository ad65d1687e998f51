"""Every API workflow's sampler settings run on the shipped nano model through the nodes' own
helpers and the real pipeline (workflows/thumbnails.py `run_samplers`): linked policy / cache
nodes build their values, the strategy the workflow names runs. Executing the graphs themselves
is tests/test_comfyui_integration.py, on a real ComfyUI server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import ladr_core
from workflows.thumbnails import run_samplers

ROOT = Path(__file__).resolve().parents[1]
API = sorted((ROOT / "workflows" / "api").glob("*.json"))
_PIPE: list = []


@pytest.mark.parametrize("path", API, ids=lambda p: p.stem)
def test_api_workflow_settings_run_on_nano(path: Path) -> None:
    if not _PIPE:
        _PIPE.append(ladr_core.load_dimoo(ladr_core.nano_model_path(), dtype=torch.float32))
    wf = json.loads(path.read_text())
    samplers = [n["inputs"] for n in wf.values() if n["class_type"] == "LADR_DiMOOSampler"]
    for kw in samplers:  # nano's size; few steps (the preset's own T still applies)
        kw.update(width=48, height=48, steps=min(kw["steps"], 8))
    runs = run_samplers(wf, _PIPE[0])
    assert len(runs) == len(samplers) >= 1
    for (images, text), kw in zip(runs, samplers, strict=True):
        n_prompts = len(kw["prompt"].strip().splitlines()) if kw["one_prompt_per_line"] else 1
        assert images.shape == (n_prompts * kw["batch_size"], 48, 48, 3)
        assert text.startswith(kw["strategy"] + ": ")
