"""Fixtures of the node tests: a model handle over the real nano pipeline, and the events the
nodes hand to the host, recorded."""

from __future__ import annotations

import pytest
from support.nodes import nano_pipe

from nodes import host
from nodes.handles import DiMOOModel


@pytest.fixture
def fake_model() -> DiMOOModel:
    return DiMOOModel(pipe=nano_pipe(), key=("nano",), name="nano")


@pytest.fixture
def sent(monkeypatch) -> list[tuple[str, dict]]:
    """Events the sampler hands to the host (a no-op without ComfyUI), recorded."""
    out: list[tuple[str, dict]] = []
    monkeypatch.setattr(host, "send_event", lambda e, p: out.append((e, p)))
    return out


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
