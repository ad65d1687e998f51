"""Shared pytest fixtures (keep small; helpers may append their own)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def dimoo_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Lumina-DiMOO checkpoint in the official layout (see testbed/tiny_checkpoint.py)."""
    from testbed.tiny_checkpoint import write_tiny_checkpoint

    return write_tiny_checkpoint(tmp_path_factory.mktemp("dimoo") / "Lumina-DiMOO")
