"""The emoji VQ: official VQModel layout, official encode / decode paths, resumable training."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch
from diffusers import VQModel

from lab.emoji import scenes as S
from lab.emoji import vq as V


def _tiny(monkeypatch) -> None:
    monkeypatch.setattr(V, "VQ_CONFIG", {**V.VQ_CONFIG, "block_out_channels": (8, 8, 8),
                                         "num_vq_embeddings": 16, "latent_channels": 4,
                                         "norm_num_groups": 4})


def test_saved_vq_is_a_diffusers_vqvae_folder_with_a_12_by_12_code_grid(tmp_path, disc_bank, monkeypatch):
    _tiny(monkeypatch)
    V.save_vq(V.build_vq(), tmp_path / "vqvae")
    assert sorted(p.name for p in (tmp_path / "vqvae").iterdir()) == [
        "config.json", "diffusion_pytorch_model.safetensors"]
    cfg = json.loads((tmp_path / "vqvae" / "config.json").read_text())
    assert cfg["_class_name"] == "VQModel" and cfg["lookup_from_codebook"] is True
    vq = VQModel.from_pretrained(str(tmp_path / "vqvae"))
    images, _ = S.make_dataset(disc_bank, 3, 0)
    codes = V.encode(vq, images)
    factor = 2 ** (len(cfg["block_out_channels"]) - 1)
    assert codes.shape == (3, S.CANVAS // factor, S.CANVAS // factor)
    assert int(codes.min()) >= 0 and int(codes.max()) < cfg["num_vq_embeddings"]
    back = V.round_trip(vq, images)
    assert back.shape == images.shape and back.dtype == np.uint8


def test_training_resumes_where_the_checkpoint_left_it(tmp_path, disc_bank, monkeypatch):
    _tiny(monkeypatch)
    torch.set_num_threads(1)
    images, _ = S.make_dataset(disc_bank, 16, 1)
    cfg = V.VQTrainConfig(steps=4, batch=4, crop=16, ckpt_every=2, log_every=1, restart_every=2)
    _, whole = V.train_vq(images, cfg, tmp_path / "a")
    V.train_vq(images, cfg, tmp_path / "b", stop_at=2)
    state = torch.load(tmp_path / "b" / "vq_ckpt.pt", weights_only=False)
    assert state["step"] == 2
    _, resumed = V.train_vq(images, cfg, tmp_path / "b")
    assert [h["step"] for h in resumed] == [h["step"] for h in whole]
    assert [h["rec_loss"] for h in resumed] == [h["rec_loss"] for h in whole]


def test_the_emoji_pixels_weigh_more_than_the_background():
    x = torch.ones(1, 3, 8, 8)
    x[..., :2, :2] = 0.2
    miss_emoji, miss_background = x.clone(), x.clone()
    miss_emoji[..., :2, :2] = 1.0
    miss_background[..., 4:6, 4:6] = 0.2
    assert V.reconstruction_loss(miss_emoji, x) > V.reconstruction_loss(miss_background, x)


def test_a_checkpoint_of_another_config_is_refused(tmp_path, disc_bank, monkeypatch):
    _tiny(monkeypatch)
    torch.set_num_threads(1)
    images, _ = S.make_dataset(disc_bank, 4, 1)
    cfg = V.VQTrainConfig(steps=1, batch=2, crop=16)
    V.train_vq(images, cfg, tmp_path)
    monkeypatch.setattr(V, "VQ_CONFIG", {**V.VQ_CONFIG, "num_vq_embeddings": 32})
    with pytest.raises(ValueError, match="another VQ config"):
        V.train_vq(images, dataclasses.replace(cfg, steps=2), tmp_path)
