"""VQ encoding and decoding (diffusers ``VQModel``) and the cheap codebook -> RGB preview table.

Decode follows the official ``utils/image_utils.decode_vq_to_image``: codes [B, h, w] looked up
in the codebook, decoded and clipped to [0, 1] (the DiMOO VQ works in [0, 1], no
normalisation), as ComfyUI's IMAGE float [B, H, W, 3].

Preview (the discrete twin of ComfyUI's Latent2RGBPreviewer): a table [K, p, p, 3] built once,
then a per-step preview is a gather + reshape on the tokens' device (masked tokens grey 0.5);
the decoder never runs per step. A code's decoded colour depends on its neighbours (GroupNorm
statistics and the receptive field span the image: on DiMOO-nano a code decoded alone drew red
shapes green), so the faithful table is fitted on real decodes (`fit_preview_table`, the
per-code mean of decoded patches) and may ship as `vqvae/preview_table.safetensors` (key
`preview_table`). Codes a fit never saw, or a checkpoint without one, use the probe table:
every code decoded as a uniform ``context x context`` grid, its centre patch area-pooled to p
x p, built on first use outside the sampling's memory (``pipe.preview_bytes()``). The table is
the VQ's non-persistent buffer ``ladr_preview_table``, so it moves with the VQ.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from ...devices import to_device

__all__ = ["decode_codes", "encode_images", "build_preview_table", "preview_from_table", "MASK_GREY",
           "fit_preview_table", "save_preview_table", "load_preview_table", "PREVIEW_TABLE_FILE",
           "PREVIEW_CHUNK", "PREVIEW_CONTEXT"]

MASK_GREY = 0.5
PREVIEW_TABLE_FILE = "preview_table.safetensors"  # inside the checkpoint's vqvae/ folder
PREVIEW_TABLE_KEY = "preview_table"
PREVIEW_CONTEXT = 3  # build_preview_table: each code decoded as a grid of 3 x 3 of it
PREVIEW_CHUNK = 32  # codes per decoder call: 256 calls for DiMOO's 8,192 codes, once, at
# about 0.2 GiB on its VQ (256 at a time took 1.7 GiB, more than a 512 px decode's)


def _grid(codes: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
    """[B, h*w] or [B, h, w] -> LongTensor [B, h, w] (validated)."""
    h, w = grid
    if codes.dim() == 2:
        if codes.shape[1] != h * w:
            raise ValueError(f"tokens have {codes.shape[1]} codes per item but grid {grid} needs {h * w}")
        codes = codes.view(codes.shape[0], h, w)
    if codes.dim() != 3 or tuple(codes.shape[1:]) != (h, w):
        raise ValueError(f"tokens must be [B, h*w] or [B, h, w] for grid {grid}, got {tuple(codes.shape)}")
    return codes.long()


def decode_codes(vq: Any, codes: torch.Tensor, grid: tuple[int, int],
                 check_range: bool = True, chunk: int = 1) -> torch.Tensor:
    """Codes in [0, K) -> images float [B, h*f, w*f, 3] in [0, 1] (f = VQ factor).

    check_range: refuse codes outside [0, K) (one host sync; the sampler's codes are in range
    by construction). ``chunk`` images per decoder call (default one: the activations are one
    image's whatever B, and image i equals its own decode; a larger chunk suits many small
    grids, ``build_preview_table``). The batch's images stay on the device in one output
    (``decode_bytes(..., images)`` counts them)."""
    codes = _grid(codes, grid)
    k = vq.config.num_vq_embeddings
    lo, hi = torch.stack(torch.aminmax(codes)).tolist() if check_range and codes.numel() else (0, 0)
    if lo < 0 or hi >= k:  # (one transfer for both ends)
        raise ValueError(f"tokens must be codes in [0, {k}) (subtract the image token offset first)")
    codes = to_device(codes, next(vq.parameters()).device)
    step = max(1, chunk)
    if codes.shape[0] <= step:
        return _decode_chunk(vq, codes)
    out = None
    for at in range(0, codes.shape[0], step):  # the decode loop: no host read, no host wait
        images = _decode_chunk(vq, codes[at:at + step])
        if out is None:  # every image lands in one output (no concatenation of copies)
            out = images.new_empty((codes.shape[0], *images.shape[1:]))
        out[at:at + images.shape[0]] = images
    return out


def _decode_chunk(vq: Any, codes: torch.Tensor) -> torch.Tensor:
    """Codes LongTensor [b, h, w] on the VQ's device -> images float [b, h*f, w*f, 3]."""
    b, h, w = codes.shape
    shape = (b, h, w, vq.config.vq_embed_dim or vq.config.latent_channels)
    with torch.no_grad():
        # what diffusers' VQModel.decode(..., force_not_quantize=True) computes from the codes'
        # codebook entries (either lookup_from_codebook setting), without the commit loss it
        # makes on the host and copies to the device on every call: a host wait per image
        # inside the decode loop, for a value nobody reads
        quant = vq.quantize.get_codebook_entry(codes, shape)
        spatial = quant if vq.config.norm_type == "spatial" else None
        sample = vq.decoder(vq.post_quant_conv(quant), spatial)
    return sample.float().clamp(0.0, 1.0).permute(0, 2, 3, 1).contiguous()


def encode_images(vq: Any, images: torch.Tensor, vq_factor: int) -> torch.Tensor:
    """Images float [B, H, W, 3] in [0, 1] (ComfyUI IMAGE) -> codes LongTensor [B, h*w] (CPU).

    The official encoding (``utils/image_utils.encode_img_with_paint``): pixels kept in [0, 1]
    (``VaeImageProcessor(do_normalize=False)``; a PIL image is uint8 / 255, as ComfyUI's Load
    Image gives), ``vq.encode(x).latents``, the quantizer's nearest code, row-major. H and W
    are multiples of ``vq_factor`` (the caller checks; the official processor would resize
    silently). Items are encoded one by one, so item i equals a single-image encode.
    """
    if images.dim() != 4 or images.shape[-1] != 3:
        raise ValueError(f"images must be [B, H, W, 3]; got {tuple(images.shape)}")
    b, hh, ww, _ = images.shape
    h, w = hh // vq_factor, ww // vq_factor
    param = next(vq.parameters())
    out = []
    with torch.no_grad():
        for i in range(b):  # the encode loop: no host read, no host wait
            x = to_device(images[i:i + 1], param.device).permute(0, 3, 1, 2).to(param.dtype)
            latents = vq.encode(x).latents
            if tuple(latents.shape[-2:]) != (h, w):
                raise ValueError(f"the VQ encoder made a {tuple(latents.shape[-2:])} grid from a "
                                 f"{hh}x{ww} image; expected {(h, w)} (VQ factor {vq_factor})")
            out.append(vq.quantize(latents)[2][2].reshape(1, h * w))
    return torch.cat(out).long().cpu()


def build_preview_table(vq: Any, vq_factor: int, size: int = 4,
                        context: int = PREVIEW_CONTEXT, chunk: int = PREVIEW_CHUNK
                        ) -> torch.Tensor:
    """The probe table float [K, p, p, 3] (p = min(size, vq_factor); module docstring) in K /
    chunk decoder calls, once. A lone 1x1 grid decodes mostly from the convolutions' zero
    padding (visibly off colours on DiMOO-nano), hence the default context 3."""
    if context < 1 or context % 2 == 0:
        raise ValueError(f"context must be an odd int >= 1 (got {context})")
    if size < 1:
        raise ValueError(f"size must be >= 1 (got {size})")
    p = min(size, vq_factor)
    k = vq.config.num_vq_embeddings
    device = next(vq.parameters()).device
    c, f = context // 2, vq_factor
    parts = []
    for start in range(0, k, chunk):
        codes = torch.arange(start, min(k, start + chunk), device=device)
        grids = codes[:, None, None].expand(-1, context, context)
        images = decode_codes(vq, grids, (context, context), check_range=False,  # in range:
                              chunk=chunk)  # no host read per call; [n, .., .., 3]
        centre = images[:, c * f:(c + 1) * f, c * f:(c + 1) * f].permute(0, 3, 1, 2)
        parts.append(F.adaptive_avg_pool2d(centre, p).permute(0, 2, 3, 1))
    return torch.cat(parts).contiguous()


def preview_from_table(table: torch.Tensor, tokens: torch.Tensor, masked: torch.Tensor | None,
                       grid: tuple[int, int]) -> torch.Tensor:
    """Gather + reshape: tokens [B, h*w] (masked positions drawn grey) -> [B, h*p, w*p, 3]."""
    codes = _grid(tokens, grid).flatten(1).to(table.device)
    b, n = codes.shape
    h, w = grid
    p = table.shape[1]
    codes = codes.clamp(0, table.shape[0] - 1)
    patches = table[codes]  # [B, N, p, p, 3]
    if masked is not None:
        hidden = masked.to(table.device).reshape(b, n)[..., None, None, None]
        patches = torch.where(hidden, torch.full_like(patches, MASK_GREY), patches)
    return patches.view(b, h, w, p, p, 3).permute(0, 1, 3, 2, 4, 5).reshape(b, h * p, w * p, 3)


def _pooled_patches(images: torch.Tensor, grid: tuple[int, int], p: int) -> torch.Tensor:
    """Images [B, h*f, w*f, 3] -> each token's patch area-pooled to p x p: [B*h*w, p, p, 3]."""
    b, hh, ww, _ = images.shape
    h, w = grid
    if hh % h or ww % w or hh // h != ww // w:
        raise ValueError(f"images {tuple(images.shape)} do not tile the token grid {grid}")
    f = hh // h
    patches = images.float().reshape(b, h, f, w, f, 3).permute(0, 1, 3, 5, 2, 4)
    pooled = F.adaptive_avg_pool2d(patches.reshape(-1, 3, f, f), p)
    return pooled.permute(0, 2, 3, 1).contiguous()


def fit_preview_table(tokens: torch.Tensor, images: torch.Tensor, grid: tuple[int, int],
                      base: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per code, the mean of its decoded patches (one scatter-add): codes [B, h*w] and their
    decodes [B, h*f, w*f, 3] -> (table [K, p, p, 3], counts [K]); codes never seen keep
    ``base``."""
    k, p = base.shape[0], base.shape[1]
    codes = _grid(tokens, grid).flatten().to(base.device)
    if codes.numel() and (int(codes.min()) < 0 or int(codes.max()) >= k):
        raise ValueError(f"tokens must be codes in [0, {k})")
    patches = _pooled_patches(images.to(base.device), grid, p).reshape(codes.numel(), -1)
    sums = torch.zeros(k, p * p * 3, device=base.device).index_add_(0, codes, patches)
    counts = torch.bincount(codes, minlength=k)
    mean = sums / counts.clamp(min=1)[:, None].float()
    table = torch.where(counts[:, None] > 0, mean, base.reshape(k, -1).float())
    return table.view(k, p, p, 3).contiguous(), counts


def save_preview_table(path: Any, table: torch.Tensor, metadata: dict[str, str] | None = None
                       ) -> None:
    """Write a fitted table [K, p, p, 3] as safetensors (key ``preview_table``)."""
    from safetensors.torch import save_file

    save_file({PREVIEW_TABLE_KEY: table.float().contiguous().cpu()}, str(path), metadata)


def load_preview_table(path: Any, codebook_size: int, size: int) -> torch.Tensor:
    """Read a shipped table (area-pooled to ``size``); ValueError naming the file when it does
    not fit this codebook."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            names = list(f.keys())
            if PREVIEW_TABLE_KEY not in names:
                raise ValueError(f"{path}: no {PREVIEW_TABLE_KEY!r} tensor; delete the file or "
                                 "re-fit it (lab/nano/fit_preview_table.py)")
            table = f.get_tensor(PREVIEW_TABLE_KEY)
    except ValueError:
        raise
    except Exception as exc:  # safetensors' own SafetensorError on a bad header or length
        raise ValueError(f"{path} is truncated or corrupt ({exc}); delete or re-fit it") from None
    if not table.is_floating_point() or not bool(torch.isfinite(table.float()).all()):
        raise ValueError(f"{path}: preview table is {table.dtype} or holds non-finite values; "
                         "delete or re-fit it")
    table = table.float()
    if table.dim() != 4 or table.shape[0] != codebook_size or table.shape[3] != 3 or \
            table.shape[1] != table.shape[2]:
        raise ValueError(f"{path}: preview table has shape {tuple(table.shape)}, expected "
                         f"[{codebook_size}, p, p, 3] for this codebook; delete or re-fit it")
    if table.shape[1] != size:
        pooled = F.adaptive_avg_pool2d(table.permute(0, 3, 1, 2), size)
        table = pooled.permute(0, 2, 3, 1).contiguous()
    return table
