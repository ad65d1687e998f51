"""A denoise strength travels in the run's schedule (``StepSchedule``): generate builds it once
from its steps and denoise, the run starts at its step s0 and carries s0 in its result, and the
stats read the schedule the run was given; a strength below 1 with nothing to redraw, or
outside (0, 1], is one message naming ``denoise``, before any work."""

from __future__ import annotations

import pytest
import torch

from ladr_core import DiMOOPipeline, InputError, StepSchedule
from nodes.run_stats import work_fields

PROMPT = "a red circle"


def _picture(pipe: DiMOOPipeline) -> torch.Tensor:
    size = pipe.default_size
    return torch.rand(1, size, size, 3, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("denoise", [0.01, 0.3, 0.5, 1.0])
def test_the_run_starts_at_the_schedules_step_and_the_stats_read_it(pipe: DiMOOPipeline,
                                                                     denoise: float) -> None:
    records: list[dict] = []
    res = pipe.generate(PROMPT, image=_picture(pipe), denoise=denoise, steps=8, seed=0,
                        strategy="baseline", decode=False, callback=records.append)
    plan = StepSchedule(8, denoise)
    assert res.start_step == plan.start and res.nfe == len(records) <= plan.left
    assert [int(r["item_step"][0]) for r in records] == list(range(plan.start, 8))[:res.nfe]
    fields = work_fields(res, plan)
    assert fields["steps_planned"] == plan.left
    assert fields.get("schedule_steps", 8) == 8


def test_generate_without_a_picture_refuses_a_strength_below_1(pipe: DiMOOPipeline) -> None:
    with pytest.raises(InputError, match=r"denoise is 0.5 but there is no image to redraw"):
        pipe.generate(PROMPT, denoise=0.5, steps=4)
    for bad in ("x", 0.0, 2):
        with pytest.raises(InputError, match=rf"^denoise is {bad!r}; give a number above 0"):
            pipe.generate(PROMPT, denoise=bad, steps=4)
