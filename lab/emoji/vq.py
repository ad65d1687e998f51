"""The emoji testbed's learned VQ: a diffusers `VQModel` trained on emoji scenes, resumable.

Same official conventions as DiMOO-nano's (lab/nano/vq.py, whose helpers this reuses): images
enter in [0, 1], codes come from ``vqvae.quantize(latents)[2][2]``, decoding is the official
``decode(codes, force_not_quantize=True, shape=...)`` with ``lookup_from_codebook=True``; factor
4 turns the 48 px canvas into a 12 x 12 code grid. Unlike nano's there is no code table and no
hand-assigned code: the codes are whatever the trained encoder and codebook give, as with a real
VQ. Objective: L1 + MSE (emoji pixels weighted `FG_WEIGHT` x the background) + diffusers'
VectorQuantizer loss, straight-through; codes unused over a window restart on encoder outputs.
Training checkpoints to ``cache/runs/vq_ckpt.pt`` and resumes from it; the finished model is
saved with ``save_pretrained`` to a temporary folder renamed to ``cache/model/vqvae``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from diffusers import VQModel

from lab.emoji.scenes import BACKGROUND, CANVAS
from lab.nano.vq import _restart_dead, random_crops, to_tensor

VQ_CONFIG = dict(
    in_channels=3, out_channels=3,
    down_block_types=("DownEncoderBlock2D",) * 3, up_block_types=("UpDecoderBlock2D",) * 3,
    block_out_channels=(16, 32, 64), layers_per_block=1, latent_channels=16,
    num_vq_embeddings=512, norm_num_groups=8, sample_size=CANVAS,
    mid_block_add_attention=False, lookup_from_codebook=True,
)
FG_WEIGHT = 4.0


@dataclass(frozen=True)
class VQTrainConfig:
    steps: int = 3000
    batch: int = 32
    crop: int = 24
    lr: float = 1e-3
    seed: int = 0
    ckpt_every: int = 200
    log_every: int = 100
    restart_every: int = 100


def build_vq(seed: int = 0) -> VQModel:
    torch.manual_seed(seed)  # diffusers initialises through the global generator
    return VQModel(**VQ_CONFIG)


def reconstruction_loss(rec: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """L1 + MSE, emoji pixels (away from the background) weighted FG_WEIGHT x more."""
    bg = torch.tensor(BACKGROUND, dtype=x.dtype).view(1, 3, 1, 1) / 255.0
    weight = 1.0 + FG_WEIGHT * ((x - bg).abs().amax(1, keepdim=True) > 0.02).float()
    err = (rec - x).abs() + (rec - x) ** 2
    return (weight * err).sum() / (weight.sum() * 3)


def _step(vq: VQModel, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    h = vq.encode(x).latents
    quant, q_loss, (_, _, codes) = vq.quantize(h)
    rec = vq.decoder(vq.post_quant_conv(quant), None)
    rec_loss = reconstruction_loss(rec, x)
    return rec_loss + q_loss, rec_loss, codes, h


def _lr(step: int, cfg: VQTrainConfig) -> float:
    return cfg.lr * min(1.0, 2.0 * (1 - step / cfg.steps) + 0.05)


def train_vq(images: np.ndarray, cfg: VQTrainConfig, runs: Path,
             stop_at: int | None = None) -> tuple[VQModel, list[dict]]:
    """Train on uint8 scenes [N, CANVAS, CANVAS, 3]; resumes from runs/vq_ckpt.pt if present.
    `stop_at` ends this call at that step (checkpoint written), as a kill after it would."""
    vq = build_vq(cfg.seed)
    opt = torch.optim.Adam(vq.parameters(), lr=cfg.lr)
    g = torch.Generator().manual_seed(cfg.seed)
    k = vq.config.num_vq_embeddings
    usage, start, history, spent = torch.zeros(k), 0, [], 0.0
    runs.mkdir(parents=True, exist_ok=True)
    ckpt = runs / "vq_ckpt.pt"
    if ckpt.is_file():
        state = torch.load(ckpt, weights_only=False)
        if state.get("config") != dict(vq.config):
            raise ValueError(f"{ckpt} was trained with another VQ config: move it away to start "
                             f"afresh, or restore that config in lab/emoji/vq.py")
        vq.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        g.set_state(state["gen"])
        usage, start, history, spent = state["usage"], state["step"], state["history"], state["s"]
        print(f"vq resumed at step {start}", flush=True)
    t0 = time.time()
    for step in range(start, min(cfg.steps, stop_at or cfg.steps)):
        idx = torch.randint(len(images), (cfg.batch,), generator=g)
        loss, rec_loss, codes, h = _step(vq, random_crops(images, idx.numpy(), cfg.crop, g))
        for gr in opt.param_groups:
            gr["lr"] = _lr(step, cfg)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        usage += torch.bincount(codes.flatten(), minlength=k).float()
        if step % cfg.restart_every == cfg.restart_every - 1 and step < int(cfg.steps * 0.75):
            _restart_dead(vq, h.detach().permute(0, 2, 3, 1).reshape(-1, h.shape[1]), usage, g)
            usage.zero_()
        if step % cfg.log_every == 0 or step == cfg.steps - 1:
            history.append({"step": step, "rec_loss": round(rec_loss.item(), 5),
                            "codes_used": int((usage > 0).sum()),
                            "s": round(spent + time.time() - t0, 1)})
            print("vq", history[-1], flush=True)
        if (step + 1) % cfg.ckpt_every == 0 or step + 1 in (cfg.steps, stop_at):
            _save_ckpt(ckpt, vq, opt, g, usage, step + 1, history, spent + time.time() - t0)
    return vq.eval(), history


def _save_ckpt(path: Path, vq, opt, g, usage, step: int, history: list, spent: float) -> None:
    tmp = path.with_suffix(".tmp")
    torch.save({"model": vq.state_dict(), "config": dict(vq.config), "opt": opt.state_dict(),
                "gen": g.get_state(),
                "usage": usage, "step": step, "history": history, "s": spent}, tmp)
    os.replace(tmp, path)   # a checkpoint cut mid-write is never read


def save_vq(vq: VQModel, folder: Path) -> None:
    """save_pretrained into a temporary folder, renamed to `folder` once complete."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="vqvae.tmp-", dir=folder.parent))
    try:
        vq.save_pretrained(str(tmp), safe_serialization=True)
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@torch.no_grad()
def encode(vq: VQModel, images: np.ndarray, batch: int = 256) -> torch.Tensor:
    """Official encode path: uint8 [N, H, W, 3] -> codes [N, h, w] (long)."""
    out = []
    for i in range(0, len(images), batch):
        x = to_tensor(images[i:i + batch])
        h = vq.encode(x).latents
        codes = vq.quantize(h)[2][2]
        out.append(codes.reshape(len(x), h.shape[2], h.shape[3]))
    return torch.cat(out)


@torch.no_grad()
def round_trip(vq: VQModel, images: np.ndarray) -> np.ndarray:
    """Encode then decode by the official paths: uint8 [N, H, W, 3] -> uint8 [N, H, W, 3]."""
    from lab.nano.vq import decode_codes

    out = [decode_codes(vq, encode(vq, images[i:i + 256])) for i in range(0, len(images), 256)]
    return (torch.cat(out).permute(0, 2, 3, 1).numpy() * 255).round().astype(np.uint8)
