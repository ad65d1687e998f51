"""A denoise strength has one check and one start step: ``strength.check_denoise`` runs once per
job, where the job is planned, and ``strength.start_step`` once per run, in
``DiMOOPipeline.run``, which carries it in ``GenerationResult.start_step`` for the stats. A
second copy (another check on the way, the stats recomputing the start) fails these tests."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

import ladr_core.strength as strength
from ladr_core import DiMOOPipeline, InputError, start_step
from nodes.run_stats import work_fields

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "a red circle"


def _callers(name: str) -> set[str]:
    """'file:function' of every call of `name` in the product's code (ladr_core/, nodes/)."""
    found: set[str] = set()
    for path in sorted([*ROOT.glob("ladr_core/**/*.py"), *ROOT.glob("nodes/**/*.py")]):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for call in ast.walk(fn):
                f = getattr(call, "func", None)
                if isinstance(f, ast.Name | ast.Attribute) and \
                        getattr(f, "id", getattr(f, "attr", None)) == name:
                    found.add(f"{path.relative_to(ROOT).as_posix()}:{fn.name}")
    return found


def test_the_start_step_is_computed_by_the_run_alone() -> None:
    """The run's s0 comes from DiMOOPipeline.run; official_passes computes the official
    sampler's own (its T of 64) for the comparison."""
    assert _callers("start_step") == {"ladr_core/dimoo/pipeline.py:run",
                                      "ladr_core/official_cost.py:official_passes"}


def test_a_strength_is_checked_where_its_job_is_planned() -> None:
    """Picture jobs: their two planners; a job without a picture: the entry that refuses a
    strength below 1 (generate, the DiMOO Canvas); official_passes: its own argument."""
    assert _callers("check_denoise") == {
        "ladr_core/dimoo/tasks/painting.py:plan_painting",
        "ladr_core/dimoo/tasks/painting.py:plan_tokens",
        "ladr_core/dimoo/pipeline.py:_text_or_image",
        "nodes/canvas.py:prepare_job",
        "ladr_core/official_cost.py:official_passes"}


@pytest.fixture
def checks(monkeypatch) -> list[object]:
    """The values check_denoise checked (it reads each through strength.is_real once)."""
    seen: list[object] = []
    real = strength.is_real
    monkeypatch.setattr(strength, "is_real", lambda v: seen.append(v) or real(v))
    return seen


def _picture(pipe: DiMOOPipeline) -> torch.Tensor:
    size = pipe.default_size
    return torch.rand(1, size, size, 3, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("route", ["text", "image", "tokens", "paint"])
def test_each_route_checks_its_strength_once(pipe: DiMOOPipeline, checks: list,
                                             route: str) -> None:
    picture = _picture(pipe)
    kw = dict(steps=4, seed=0, strategy="baseline", decode=False)
    if route == "text":
        pipe.generate(PROMPT, **kw)
    elif route == "image":
        pipe.generate(PROMPT, image=picture, denoise=0.5, **kw)
    elif route == "tokens":
        pipe.generate(PROMPT, tokens=pipe.encode_image(picture), denoise=0.5, **kw)
    else:
        mask = torch.ones(1, *picture.shape[1:3])
        pipe.paint(PROMPT, picture, mask, denoise=0.5, **kw)
    assert checks == [1.0 if route == "text" else 0.5]


@pytest.mark.parametrize("denoise", [0.0, 0.3, 0.5, 1.0])
def test_the_run_carries_its_start_and_the_stats_read_it(pipe: DiMOOPipeline,
                                                         denoise: float) -> None:
    res = pipe.generate(PROMPT, image=_picture(pipe), denoise=denoise, steps=8, seed=0,
                        strategy="baseline", decode=False)
    assert res.start_step == start_step(8, denoise)
    fields = work_fields(res, 8)
    assert fields["steps_planned"] == 8 - res.start_step
    assert fields.get("schedule_steps", 8) == 8


def test_generate_without_a_picture_refuses_a_strength_below_1(pipe: DiMOOPipeline) -> None:
    with pytest.raises(InputError, match=r"denoise is 0.5 but there is no image to redraw"):
        pipe.generate(PROMPT, denoise=0.5, steps=4)
    with pytest.raises(InputError, match=r"denoise is 'x'"):
        pipe.generate(PROMPT, denoise="x", steps=4)
