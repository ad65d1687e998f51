"""Shared pytest fixtures (keep small; helpers may append their own).

Without ComfyUI, the strict stand-in for its V3 API (comfy_stand_in.py) is installed before
any test imports the nodes; inside a real host the real `comfy_api` is used.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

if importlib.util.find_spec("comfy_api") is None:
    import comfy_stand_in

    comfy_stand_in.install()


@pytest.fixture(scope="session")
def dimoo_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Lumina-DiMOO checkpoint in the official layout (testbed/tiny_checkpoint.py)."""
    from testbed.tiny_checkpoint import write_tiny_checkpoint

    return write_tiny_checkpoint(tmp_path_factory.mktemp("dimoo") / "Lumina-DiMOO")
