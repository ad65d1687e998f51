"""Every shipped nano template draws what its prompt says: its API workflow (example_workflows/api/,
every one whose loader loads a built-in nano model) run through the pack's nodes
(lab/workflows/graph.py: the nodes' own ``execute`` on the V3 stand-in, Load Image and Pad Image for
Outpainting as ComfyUI gives them), exactly as the template sets them, and every picture each
VQ Decode gives held to the nano evaluator against its sampler's prompt (inpainting and
outpainting: the whole delivered picture; a batch: every image). The settings and the evidence
for them: lab/workflows/build_examples.py (NANO_SETTINGS)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.workflows.graph import nano_templates, verdicts
from nodes import BUILT_IN
from tests.kit.templates import TEMPLATE_FILES

NANO = nano_templates(tuple(BUILT_IN))  # the caption template's prompt: its caption
MISSES: dict[str, str] = {}
"""Templates whose shipped seed misses with the best-measured setting (strict: a pass fails the
test, so the entry goes when the seed or setting changes)."""


def test_every_template_titled_nano_loads_the_built_in_nano() -> None:
    """The list comes from the files' loaders; the titles agree with it."""
    titled = {stem for stem, title in TEMPLATE_FILES.items() if "(nano" in title}
    assert titled and titled <= {p.stem for p in NANO}


@pytest.mark.parametrize("path", [
    pytest.param(p, marks=pytest.mark.xfail(reason=MISSES[p.stem], strict=True))
    if p.stem in MISSES else p for p in NANO], ids=lambda p: p.stem)
def test_nano_template_output_passes_the_evaluator(path: Path, sent) -> None:
    got = verdicts(json.loads(path.read_text()))
    assert got, f"{path.stem}: no picture"
    failed = [v for v in got if not v["passed"]]
    assert not failed, f"{path.stem}: the evaluator saw {failed}"
