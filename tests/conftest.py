"""Shared pytest fixtures and the test layout.

Tests live by area: core/ (the sampler and strategies), dimoo/ (the runtime), calibrate/,
nodes/ (nodes against the stand-in or the real V3 API), host/ (a real ComfyUI server), web/ (the
real frontend), docs/ (documents
against the code), emulation/ (the GPU paths on the CUDA emulation), kit_tests/ (the kit); the
lab's own tests are in lab/tests/. What they share is the package support/ and tests/kit/
(`tests.kit`, imported from the checkout root like `lab`: `tests` has no __init__.py). These
tests pass without lab/ (scripts/test.sh runs them on a copy of the tree without it).

Without ComfyUI, the strict stand-in for its V3 API
(tests/kit/comfy_stand_in.py) is installed before
any test imports the nodes; inside a real host the real `comfy_api` is used.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # `support`, from every test folder

if "comfy_api" not in sys.modules and importlib.util.find_spec("comfy_api") is None:
    from tests.kit import comfy_stand_in

    comfy_stand_in.install()


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist (scripts/test.sh runs ``-n 2``) each worker takes its share of the
    cores for torch and for the processes it starts (ComfyUI servers, scenario scripts), so two
    workers on two cores do not run four threads."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not workers:
        return
    share = str(max(1, len(os.sched_getaffinity(0)) // int(workers)))
    os.environ.setdefault("OMP_NUM_THREADS", share)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


@pytest.fixture(scope="session")
def dimoo_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Lumina-DiMOO checkpoint in the official layout (tests/kit/tiny_checkpoint.py)."""
    from tests.kit.tiny_checkpoint import write_tiny_checkpoint

    return write_tiny_checkpoint(tmp_path_factory.mktemp("dimoo") / "Lumina-DiMOO")


@pytest.fixture
def sent(monkeypatch) -> list[tuple[str, dict]]:  # noqa: ANN001
    """Events the nodes hand to the host (a no-op without ComfyUI), recorded."""
    from nodes import host

    out: list[tuple[str, dict]] = []
    monkeypatch.setattr(host, "send_event", lambda e, p: out.append((e, p)))
    return out


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    """A real ComfyUI server with this pack, one per test module (support/comfy_server.py);
    yields (port, base directory)."""
    from support.comfy_server import started_server

    with started_server(tmp_path_factory.mktemp("comfy")) as running:
        yield running
