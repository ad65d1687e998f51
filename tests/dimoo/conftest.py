"""Fixtures of the runtime tests: the tiny random checkpoint loaded once per module."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ladr_core.dimoo import DiMOOPipeline, load_dimoo


@pytest.fixture(scope="module")
def pipe(dimoo_checkpoint: Path) -> DiMOOPipeline:
    """The tests' tiny official-layout checkpoint (tests/conftest.py), float32 on the CPU."""
    return load_dimoo(dimoo_checkpoint, device="cpu", dtype=torch.float32)
