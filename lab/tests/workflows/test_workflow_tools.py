"""The lab's workflow tools held to what they build: the builder (lab/workflows/build_examples.py)
writes example_workflows/ exactly as committed and opens the templates in the window and at the
zoom the product's layout tests measure (tests/web/test_workflow_layout.py); the prompt-list
queue (lab/workflows/queue_prompts.py) puts each prompt and seed into the samplers."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support import ROOT

from lab.workflows import queue_prompts
from tests.web.test_workflow_layout import FIT_PAD, FIT_ZOOM, LOW_QUALITY_SCALE, WINDOWS_PX


def test_workflow_files_are_up_to_date_with_the_builder() -> None:
    out = subprocess.run([sys.executable, "-m", "lab.workflows.build_examples",
                          "--check"], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


def test_queue_script_puts_each_prompt_and_seed_into_the_samplers() -> None:
    wf = json.loads((ROOT / "example_workflows" / "api" / "ladr_vs_baseline_side_by_side.json").read_text())
    batch = queue_prompts.jobs(wf, ["a cat", "a dog"], seed=10)
    assert len(batch) == 2
    samplers = [k for k, v in wf.items() if v["class_type"] in queue_prompts.SAMPLERS]
    assert len(samplers) == 2
    for i, (job, text) in enumerate(zip(batch, ["a cat", "a dog"], strict=True)):
        for k in samplers:
            assert job[k]["inputs"]["prompt"] == text and job[k]["inputs"]["seed"] == 10 + i
    assert wf[samplers[0]]["inputs"]["prompt"] != "a cat"  # the template is not mutated
    assert queue_prompts.jobs(wf, [], None) == [wf]
    with pytest.raises(ValueError, match="no DiMOO Sampler node"):
        queue_prompts.jobs({"1": {"class_type": "SaveImage", "inputs": {}}}, ["x"], None)


def test_the_builder_opens_templates_in_these_windows_at_a_readable_zoom() -> None:
    """The builder fits the view as the frontend does (the product's layout test's numbers)
    and keeps every template above the frontend's low-quality zoom."""
    from lab.workflows import build_examples as b

    assert b.WINDOWS == WINDOWS_PX and (b.FIT_ZOOM, b.FIT_PAD) == (FIT_ZOOM, FIT_PAD)
    assert b.LOW_QUALITY_SCALE == LOW_QUALITY_SCALE < b.OPEN_SCALE
