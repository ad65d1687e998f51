"""Load DiMOO Model and the folder layouts of the real download (tests/kit/real_repo.py): a checkpoint placed straight into
models/lumina_dimoo/ is listed and loads; a refused folder's error carries the doctor's report
(python -m ladr_core.doctor), the same text."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ladr_core.dimoo import CheckpointError
from ladr_core.doctor import diagnose
from nodes import loader


@pytest.fixture
def root_checkpoint(dimoo_checkpoint: Path, tmp_path: Path, monkeypatch) -> Path:
    """models/lumina_dimoo/ holding the checkpoint's own files (no sub-folder)."""
    root = Path(shutil.copytree(dimoo_checkpoint, tmp_path / "lumina_dimoo"))
    (root / ".cache" / "huggingface").mkdir(parents=True)  # as huggingface-cli leaves it
    monkeypatch.setenv("LADR_MODELS_DIR", str(root))
    loader._CACHE.clear()
    return root


def test_a_checkpoint_straight_in_the_models_folder_is_listed_and_loads(root_checkpoint) -> None:
    choices = loader.model_choices()
    choice = loader.root_choice(str(root_checkpoint))
    assert choice in choices
    assert not any(c.startswith(("vqvae", ".cache")) for c in choices)  # its parts are not models
    assert Path(loader.resolve_model_path(choice)) == root_checkpoint
    assert loader.LoadDiMOOModel.validate_inputs(model_name=choice) is True
    model = loader.load_model(choice, "fp32")
    assert model.pipe.ids.codebook_size == 32


def test_a_refused_folder_error_carries_the_doctor_report(root_checkpoint) -> None:
    (root_checkpoint / "model-00002-of-00002.safetensors").unlink()  # an unfinished download
    choice = loader.root_choice(str(root_checkpoint))
    with pytest.raises(CheckpointError) as info:
        loader.load_model(choice, "fp32")
    report, refusals = diagnose(root_checkpoint)
    text = str(info.value)
    assert text.startswith(refusals[0]) and report in text
    assert "model-00002-of-00002.safetensors is listed" in refusals[0]
    assert not loader._CACHE
