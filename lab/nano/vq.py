"""Train DiMOO-nano's VQ autoencoder: a small diffusers `VQModel` on the procedural scenes.

Official behaviour this matches (Lumina-DiMOO ``utils/image_utils.py``): images enter the
encoder in [0, 1] (``VaeImageProcessor(do_normalize=False)``), codes are read from
``vqvae.quantize(latents)[2][2]``, and decoding is ``vqvae.decode(codes [B, h, w],
force_not_quantize=True, shape=(B, h, w, latent_channels)).sample.clip(0, 1)`` — so the config
sets ``lookup_from_codebook=True`` and the decoder is trained to output [0, 1].
VQ factor = 2 ** (len(block_out_channels) - 1) = 4: a 64x64 scene becomes a 16x16 code grid.

Objective: L1 + MSE reconstruction + diffusers' VectorQuantizer loss (codebook + 0.25 x
commitment, straight-through). Codes unused over a window are restarted on random encoder
outputs (dead-code restart), so the small codebook stays in use.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from diffusers import VQModel

from lab.nano.scenes import BACKGROUND

VQ_CONFIG = dict(
    in_channels=3, out_channels=3,
    down_block_types=("DownEncoderBlock2D",) * 3, up_block_types=("UpDecoderBlock2D",) * 3,
    block_out_channels=(16, 32, 32), layers_per_block=1, latent_channels=16,
    num_vq_embeddings=256, norm_num_groups=8, sample_size=48,
    mid_block_add_attention=False, lookup_from_codebook=True,
)


def build_vq(seed: int = 0) -> VQModel:
    torch.manual_seed(seed)  # diffusers initialises through the global generator
    return VQModel(**VQ_CONFIG)


def to_tensor(images: np.ndarray) -> torch.Tensor:
    """uint8 [B, H, W, 3] -> float [B, 3, H, W] in [0, 1]."""
    return torch.from_numpy(images).permute(0, 3, 1, 2).float().div(255.0)


def _restart_dead(vq: VQModel, z: torch.Tensor, usage: torch.Tensor, g: torch.Generator) -> int:
    """Re-initialise codes with zero usage to random latent vectors of the batch `z` [M, C]."""
    dead = (usage == 0).nonzero().flatten()
    if len(dead) == 0:
        return 0
    pick = torch.randint(len(z), (len(dead),), generator=g)
    with torch.no_grad():
        vq.quantize.embedding.weight[dead] = z[pick]
    return len(dead)


def random_crops(images: np.ndarray, idx: np.ndarray, crop: int, g: torch.Generator) -> torch.Tensor:
    """float [B, 3, crop, crop] crops at multiples of 4 px (the model is fully convolutional,
    so training on crops is 4x cheaper and the decoder still runs on full 64x64 grids)."""
    size = images.shape[1]
    if crop >= size:
        return to_tensor(images[idx])
    offs = torch.randint((size - crop) // 4 + 1, (len(idx), 2), generator=g) * 4
    out = np.stack([images[i, y:y + crop, x:x + crop] for i, (y, x) in zip(idx, offs.tolist(), strict=True)])
    return to_tensor(out)


def reconstruction_loss(rec: torch.Tensor, x: torch.Tensor, fg_weight: float = 10.0) -> torch.Tensor:
    """L1 + MSE with shape pixels weighted `fg_weight` x the background (shapes cover ~10 % of
    a scene; unweighted, the autoencoder collapses to painting the background only)."""
    bg = torch.tensor(BACKGROUND, dtype=x.dtype).view(1, 3, 1, 1) / 255.0
    weight = 1.0 + fg_weight * ((x - bg).abs().amax(1, keepdim=True) > 0.02).float()
    err = (rec - x).abs() + (rec - x) ** 2
    return (weight * err).sum() / (weight.sum() * 3)


def train_vq(images: np.ndarray, steps: int, batch: int = 32, lr: float = 1e-3, seed: int = 0,
             crop: int = 24, log_every: int = 50) -> tuple[VQModel, dict]:
    """Train on uint8 images [N, 64, 64, 3] (random `crop` px crops); returns model + stats."""
    vq = build_vq(seed)
    opt = torch.optim.Adam(vq.parameters(), lr=lr)
    g = torch.Generator().manual_seed(seed)
    k = vq.config.num_vq_embeddings
    usage = torch.zeros(k)
    t0 = time.time()
    stats: dict = {}
    for step in range(steps):
        idx = torch.randint(len(images), (batch,), generator=g)
        x = random_crops(images, idx.numpy(), crop, g)
        h = vq.encode(x).latents
        quant, q_loss, (_, _, codes) = vq.quantize(h)
        rec = vq.decoder(vq.post_quant_conv(quant), None)
        rec_loss = reconstruction_loss(rec, x)
        loss = rec_loss + q_loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        for gr in opt.param_groups:
            gr["lr"] = lr * min(1.0, 2.0 * (1 - step / steps) + 0.05)
        usage += torch.bincount(codes.flatten(), minlength=k).float()
        if step % 100 == 99 and step < int(steps * 0.75):
            z = h.detach().permute(0, 2, 3, 1).reshape(-1, h.shape[1])
            _restart_dead(vq, z, usage, g)
            usage.zero_()
        if step % log_every == 0 or step == steps - 1:
            stats = {"step": step, "rec_loss": rec_loss.item(), "q_loss": q_loss.item(),
                     "codes_used": int((usage > 0).sum()), "s": round(time.time() - t0, 1)}
            print("vq", stats, flush=True)
    return vq.eval(), stats


def patches(images: np.ndarray, factor: int) -> np.ndarray:
    """uint8 [N, H, W, 3] -> uint8 [N, h, w, factor * factor * 3]: each token's pixel patch."""
    n, hh, ww, c = images.shape
    h, w = hh // factor, ww // factor
    x = images.reshape(n, h, factor, w, factor, c).transpose(0, 1, 3, 2, 4, 5)
    return np.ascontiguousarray(x.reshape(n, h, w, factor * factor * c))


@dataclass(frozen=True)
class CodeTable:
    """One code per distinct token patch: `patches` uint8 [M, f*f*3] -> `codes` long [M]."""

    patches: np.ndarray
    codes: torch.Tensor

    @property
    def factor(self) -> int:
        """Patch side in pixels (the VQ factor), from the stored patch length f * f * 3."""
        return math.isqrt(self.patches.shape[1] // 3)

    def lookup(self, images: np.ndarray) -> torch.Tensor:
        """Codes [N, h, w] of uint8 images; every patch must be in the table."""
        p = patches(images, self.factor)
        flat = p.reshape(-1, p.shape[-1])
        _, inv = np.unique(np.concatenate([self.patches, flat]), axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        slot = np.full(int(inv.max()) + 1, -1, dtype=np.int64)
        slot[inv[:len(self.patches)]] = np.arange(len(self.patches))
        hit = slot[inv[len(self.patches):]]
        if (hit < 0).any():
            raise ValueError(f"{int((hit < 0).sum())} token patches are not in the code table "
                             "(only grid-aligned scenes from lab.nano.scenes can be encoded)")
        return self.codes[torch.from_numpy(hit)].view(p.shape[:3])

    def save(self, path: str | Path) -> None:
        torch.save({"patches": torch.from_numpy(self.patches), "codes": self.codes}, path)

    @classmethod
    def load(cls, path: str | Path) -> CodeTable:
        d = torch.load(path, weights_only=True)
        return cls(d["patches"].numpy(), d["codes"])


def build_code_table(vq: VQModel, images: np.ndarray) -> tuple[CodeTable, dict]:
    """Canonical codes: every distinct token patch gets one code of its own.

    The encoder sees context, so identical patches (above all the flat background) get many
    codes; that choice carries no information and would only make the transformer's targets
    arbitrary. Scenes are grid-aligned (lab.nano.scenes), so a token's patch alone says which
    shape part it is. Distinct patches, most frequent first, take their most frequent encoder
    code not yet taken (else the free code nearest their mean latent), so the map is one to one
    and the decoder, fine-tuned on it (`finetune_decoder`), can draw every part."""
    f = 2 ** (len(vq.config.block_out_channels) - 1)
    p = patches(images, f).reshape(-1, f * f * 3)
    uniq, inv, counts = np.unique(p, axis=0, return_inverse=True, return_counts=True)
    inv = torch.from_numpy(inv.reshape(-1))
    k = vq.config.num_vq_embeddings
    if len(uniq) > k:
        raise ValueError(f"{len(uniq)} distinct token patches but only {k} codes")
    lat = encode_latents(vq, images)
    lat = lat.reshape(-1, lat.shape[-1])
    with torch.no_grad():  # nearest code per latent, as the official quantize(...)[2][2]
        enc = vq.quantize(lat[:, :, None, None])[2][2].reshape(-1)
    emb = vq.quantize.embedding.weight.detach()
    taken = torch.zeros(k, dtype=torch.bool)
    codes = torch.empty(len(uniq), dtype=torch.long)
    fallback = 0
    for m in np.argsort(-counts, kind="stable").tolist():
        sel = inv == m
        hist = torch.bincount(enc[sel], minlength=k).float()
        hist[taken] = -1
        if hist.max() > 0:
            c = int(hist.argmax())
        else:
            dist = (emb - lat[sel].mean(0)).pow(2).sum(1)
            dist[taken] = float("inf")
            c, fallback = int(dist.argmin()), fallback + 1
        codes[m], taken[c] = c, True
    return CodeTable(uniq, codes), {"distinct_patches": len(uniq), "nearest_code_fallbacks": fallback}


@torch.no_grad()
def _quantized(vq: VQModel, images: np.ndarray, table: CodeTable | None) -> torch.Tensor:
    """Quantized latents [B, C, h, w] of uint8 images (canonical codes if a table is given)."""
    if table is None:
        return vq.quantize(vq.encode(to_tensor(images)).latents)[0]
    codes = table.lookup(images)
    b, h, w = codes.shape
    return vq.quantize.get_codebook_entry(codes, (b, h, w, vq.config.latent_channels))


def finetune_decoder(vq: VQModel, images: np.ndarray, steps: int, batch: int = 16,
                     lr: float = 5e-4, seed: int = 0, log_every: int = 100,
                     table: CodeTable | None = None) -> dict:
    """Second phase: train only post_quant_conv + decoder on full images, encoder and codebook
    frozen (so every code stays the same and a transformer trained on them stays valid); fixes
    the border and small-shape fidelity left by the crop phase. With a `table` the decoder
    learns to draw the canonical codes (see `build_code_table`)."""
    vq.requires_grad_(False)
    params = [*vq.post_quant_conv.parameters(), *vq.decoder.parameters()]
    for p in params:
        p.requires_grad_(True)
    opt = torch.optim.Adam(params, lr=lr)
    g = torch.Generator().manual_seed(seed + 1)
    stats: dict = {}
    t0 = time.time()
    for step in range(steps):
        idx = torch.randint(len(images), (batch,), generator=g)
        x = to_tensor(images[idx.numpy()])
        quant = _quantized(vq, images[idx.numpy()], table)
        rec = vq.decoder(vq.post_quant_conv(quant), None)
        loss = reconstruction_loss(rec, x)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        for gr in opt.param_groups:
            gr["lr"] = lr * (1 - step / steps) + 1e-5
        if step % log_every == 0 or step == steps - 1:
            stats = {"step": step, "dec_rec_loss": loss.item(), "s": round(time.time() - t0, 1)}
            print("vq-decoder", stats, flush=True)
    vq.requires_grad_(False)
    return stats


@torch.no_grad()
def encode_latents(vq: VQModel, images: np.ndarray, batch: int = 256) -> torch.Tensor:
    """uint8 [N, H, W, 3] -> encoder latents [N, h, w, C] (before quantisation)."""
    out = [vq.encode(to_tensor(images[i:i + batch])).latents for i in range(0, len(images), batch)]
    return torch.cat(out).permute(0, 2, 3, 1)


@torch.no_grad()
def decode_codes(vq: VQModel, codes: torch.Tensor) -> torch.Tensor:
    """Official decode path: codes [B, h, w] -> float [B, 3, H, W] in [0, 1]."""
    b, h, w = codes.shape
    shape = (b, h, w, vq.config.latent_channels)
    return vq.decode(codes, force_not_quantize=True, shape=shape).sample.clip(0, 1)


def save_grid(images: torch.Tensor, path: str | Path, cols: int = 8, scale: int = 4) -> None:
    """float [B, 3, H, W] in [0, 1] -> one PNG grid (nearest upscaling)."""
    from PIL import Image

    b, _, h, w = images.shape
    rows = (b + cols - 1) // cols
    canvas = torch.ones(3, rows * h, cols * w)
    for i in range(b):
        r, c = divmod(i, cols)
        canvas[:, r * h:(r + 1) * h, c * w:(c + 1) * w] = images[i]
    arr = (canvas.permute(1, 2, 0).numpy() * 255).round().astype(np.uint8)
    Image.fromarray(arr).resize((cols * w * scale, rows * h * scale), Image.NEAREST).save(path)
