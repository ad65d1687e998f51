"""Fixtures of the node tests: a model handle over the real nano pipeline, one over the tiny
checkpoint with a three-setting calibration list (LADR Calibrate). The events the nodes hand to
the host are recorded by tests/conftest.py's ``sent``."""

from __future__ import annotations

import pytest
import torch
from support.nodes import nano_pipe

import ladr_core
from nodes.handles import DiMOOModel


@pytest.fixture
def three_candidates(monkeypatch) -> None:
    """The calibration runs three settings (the CLI tests run the whole default list)."""
    import ladr_core.calibrate.runner as runner

    full = runner.default_candidates
    monkeypatch.setattr(runner, "default_candidates", lambda steps: full(steps)[:3])


@pytest.fixture
def model(tmp_path) -> DiMOOModel:
    """A DiMOOModel over the tiny random checkpoint in tmp_path (the LADR Calibrate tests)."""
    from tests.kit.tiny_checkpoint import write_tiny_checkpoint

    folder = write_tiny_checkpoint(tmp_path / "ckpt")
    pipe = ladr_core.load_dimoo(folder, dtype=torch.float32)
    return DiMOOModel(pipe=pipe, key=(str(folder), 0.0, "torch.float32", "cpu"), name="tiny")


@pytest.fixture
def fake_model() -> DiMOOModel:
    return DiMOOModel(pipe=nano_pipe(), key=("nano",), name="nano")


@pytest.fixture
def seen(fake_model, monkeypatch) -> list[dict]:
    """The keyword arguments of every pipe.run call the sampler node makes."""
    calls: list[dict] = []
    real = fake_model.pipe.run
    monkeypatch.setattr(fake_model.pipe, "run", lambda *a, **k: calls.append(k) or real(*a, **k))
    return calls


@pytest.fixture
def real_model_installed(tmp_path, monkeypatch) -> None:
    """As on a machine where the user put the real checkpoint at models/lumina_dimoo/."""
    (tmp_path / "Lumina-DiMOO").mkdir()
    (tmp_path / "Lumina-DiMOO" / "config.json").write_text("{}")
    monkeypatch.setenv("LADR_MODELS_DIR", str(tmp_path))
