"""The shipped nano-mmu shares nano's VQ-VAE and preview table, stored once: its config.json names
nano's ``vqvae/`` (``vqfiles.SHARED_VQ_KEY``) and every reader finds it through
``vqfiles.vq_folder``; it loads as before, and a saved copy stands alone."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from ladr_core import load_dimoo, nano_mmu_model_path, nano_model_path
from ladr_core.dimoo.images import PREVIEW_BUFFER
from ladr_core.dimoo.save import save_dimoo
from ladr_core.dimoo.weights.files import CheckpointError
from ladr_core.dimoo.weights.vqfiles import SHARED_VQ_KEY, vq_folder


def test_the_pair_stores_one_vq() -> None:
    assert not (nano_mmu_model_path() / "vqvae").exists()
    assert vq_folder(nano_mmu_model_path()) == vq_folder(nano_model_path()).resolve()


def test_nano_mmu_loads_nanos_vq_and_preview_table() -> None:
    mmu = load_dimoo(nano_mmu_model_path(), dtype=torch.float32)
    nano = load_dimoo(nano_model_path(), dtype=torch.float32)
    ours, theirs = mmu.vq.state_dict(), nano.vq.state_dict()
    assert ours.keys() == theirs.keys()
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)
    table = getattr(mmu.vq, PREVIEW_BUFFER, None)
    assert table is not None and torch.equal(table, getattr(nano.vq, PREVIEW_BUFFER))


def test_a_saved_copy_carries_its_own_vq(tmp_path: Path) -> None:
    pipe = load_dimoo(nano_mmu_model_path(), dtype=torch.float32)
    out = save_dimoo(pipe, tmp_path / "mmu-copy")
    assert (out / "vqvae" / "config.json").is_file()
    assert SHARED_VQ_KEY not in json.loads((out / "config.json").read_text())
    again = load_dimoo(out, dtype=torch.float32)
    assert all(torch.equal(v, pipe.vq.state_dict()[k]) for k, v in again.vq.state_dict().items())


def test_a_shared_vq_that_is_missing_is_named(tmp_path: Path) -> None:
    folder = tmp_path / "alone"
    shutil.copytree(nano_mmu_model_path(), folder)  # its ../dimoo_nano/vqvae is not there
    with pytest.raises(CheckpointError, match=r"dimoo_nano.vqvae.config\.json is missing"):
        load_dimoo(folder, dtype=torch.float32)
