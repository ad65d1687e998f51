"""Test-only transcriptions of Lumina-DiMOO's official painting and image-to-image paths.

What is transcribed (Alpha-VLLM/Lumina-DiMOO), step by step, at batch 1, with the official
per-step host logic (Python loop, `.item()`, boolean-mask indexing, one unpadded forward per
branch over the full vocabulary):

* `paint_tokens`: `utils/image_utils.encode_img_with_paint` (diffusers `VaeImageProcessor`
  without normalisation on a PIL image, `vqvae.encode(x).latents`, `vqvae.quantize(...)[2][2]`,
  the centred rectangle from `mask_h_ratio` / `mask_w_ratio` mapped to the pixel grid,
  `F.interpolate(mode="area") > 0.5`, optional `dilate_latent_k`, outpainting = complement);
* `paint_generate`: `inference/inference_t2i.py --painting_mode` (prompt =
  `<system>..</system><user>prompt</user>` + [BOA, BOI] + image tokens + [EOI, EOA], uncond =
  `<uncondition>` prompt + the image part) and `generators/image_generation_generator.
  generate_image` without the cache (CFG `(1 + s) * cond - s * uncond`, Gumbel-max sampling,
  `mask_by_random_topk`, keep counts over vq_len = the MASK count);
* `edit_prompts`: `utils/prompt_utils.generate_image_to_image_prompt` (the edit type picks the
  system prompt and instruction by substring, in the official order);
* `edit_generate`: `inference/inference_i2i.py` (cond = prompt ids with the input image tokens
  [BOI, rows + NEWLINE, EOI] inserted before the last id, text-uncond = the `<uncondition>`
  prompt with the same insertion, image-uncond = the prompt ids alone; each + the prediction
  part) and `generators/image_to_image_generator.generate_i2i` (logits = cond
  + s_text (cond - uncond_text) + s_img (cond - uncond_img));
* `multiturn_generate`: `edit_multiturn_<i>` turn after turn: turn i is `edit_generate` with
  the i-th instruction (`utils/prompt_utils.get_edit_type_specific_prompt`) of the picture the
  turn before saved (`utils/image_utils.decode_vq_to_image`: `vqvae.decode(...,
  force_not_quantize=True).sample.clip(0, 1)`, `VaeImageProcessor.postprocess` to a PIL image),
  read back as `inference_i2i.py` reads `--image_path`.

Adaptations, all neutral to the tokens: the checkpoint's own ids replace the hard-coded DiMOO
constants (126336, 126084, 126356, ...; the tiny test vocabulary is compact); the forward is the
native `LLaDAModel` (logits equal to the official model's: tests/dimoo/test_dimoo_golden.py); at
temperature 0 the re-mask noise, which the official code draws and multiplies by 0, is not drawn
(as support/official.py); the official crop of the edit input to a 512 px-area bucket
(`var_center_crop`, whose offset is random) is not transcribed: both sides get the image at its
final size.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

from .official import official_loop


def _break_lines(seq: list[int], h: int, w: int, newline: int) -> list[int]:
    out: list[int] = []
    for i in range(h):
        out += seq[i * w:(i + 1) * w] + [newline]
    return out


def _vq_indices(img: Image.Image, vq) -> tuple[torch.Tensor, torch.Tensor]:
    from diffusers.image_processor import VaeImageProcessor

    scale = 2 ** (len(vq.config.block_out_channels) - 1)
    x = VaeImageProcessor(vae_scale_factor=scale, do_normalize=False).preprocess(img.convert("RGB"))
    with torch.no_grad():
        latents = vq.encode(x).latents
        _, _, lat_h, lat_w = latents.shape
        return x, vq.quantize(latents)[2][2].view(1, lat_h, lat_w)


def paint_tokens(img: Image.Image, vq, ids, mask_h_ratio: float, mask_w_ratio: float,
                 mask_mode: str, dilate_latent_k: int = 0) -> list[int]:
    """encode_img_with_paint: image rows with MASK at the tokens to paint, NEWLINE per row."""
    W, H = img.size
    mh, mw = int(round(H * mask_h_ratio)), int(round(W * mask_w_ratio))
    top, left = (H - mh) // 2, (W - mw) // 2
    x, indices = _vq_indices(img, vq)
    _, lat_h, lat_w = indices.shape
    Hp, Wp = x.shape[-2:]
    mask_px = torch.zeros((1, 1, Hp, Wp), dtype=torch.float32)
    top_p, left_p = int(round(top * Hp / H)), int(round(left * Wp / W))
    bh_p, bw_p = int(round(mh * Hp / H)), int(round(mw * Wp / W))
    mask_px[:, :, top_p:top_p + bh_p, left_p:left_p + bw_p] = 1.0
    if mask_mode == "outpainting":
        mask_px = 1.0 - mask_px
    mask_lat = (F.interpolate(mask_px, size=(lat_h, lat_w), mode="area") > 0.5)[0, 0]
    if dilate_latent_k > 0:
        ker = 2 * dilate_latent_k + 1
        m = F.max_pool2d(mask_lat.float()[None, None], kernel_size=ker, stride=1,
                         padding=dilate_latent_k)
        mask_lat = m[0, 0] > 0.5
    idx_flat, mask_flat = indices.view(-1), mask_lat.view(-1)
    tokens = torch.empty_like(idx_flat)
    tokens[mask_flat] = ids.mask
    tokens[~mask_flat] = idx_flat[~mask_flat] + ids.image_offset
    return _break_lines(tokens.tolist(), lat_h, lat_w, ids.newline)


def image_tokens(img: Image.Image, vq, ids) -> list[int]:
    """encode_img_with_breaks: [BOI] + rows of codes + NEWLINE + [EOI]."""
    _, indices = _vq_indices(img, vq)
    _, lat_h, lat_w = indices.shape
    codes = (indices.view(-1) + ids.image_offset).tolist()
    return [ids.boi] + _break_lines(codes, lat_h, lat_w, ids.newline) + [ids.eoi]


def _logits(model, seq: list[int] | torch.Tensor, ids) -> torch.Tensor:
    seq = torch.as_tensor(seq).view(1, -1)
    with torch.no_grad():
        return model(seq)[..., ids.image_offset: ids.image_offset + ids.codebook_size]


def _loop(x: torch.Tensor, code_start: int, guided, ids, steps: int, temperature: float,
          generator: torch.Generator | None) -> torch.Tensor:
    """The official loop (support.official.official_loop) on sequence x [1, P], MASK ids where
    codes are to generate; `guided(x, vq_mask)` returns the guided logits of the masked
    positions [1, L, K]. Returns codes [1, N]."""
    x, _ = official_loop(x, x == ids.mask, guided, steps, temperature, generator,
                         offset=ids.image_offset, mask_id=ids.mask)
    vq_ids = x[0, code_start:-2]
    return vq_ids[vq_ids != ids.newline].view(1, -1) - ids.image_offset


def paint_generate(model, encode, ids, prompt: str, img_tokens: list[int], steps: int,
                   cfg: float, temperature: float, generator: torch.Generator | None
                   ) -> torch.Tensor:
    """inference_t2i.py --painting_mode + generate_image (no cache): codes [1, N]."""
    system = "Generate an image according to the text prompt."
    con = encode(f"<system>{system}</system><user>{prompt}</user>")
    uncon = torch.tensor(encode(f"<system>{system}</system><user><uncondition></user>"))[None]
    x = torch.tensor(con + [ids.boa, ids.boi] + img_tokens + [ids.eoi, ids.eoa])[None]
    code_start = len(con) + 2

    def guided(x: torch.Tensor, vq_mask: torch.Tensor) -> torch.Tensor:
        if cfg <= 0:
            return _logits(model, x, ids)[:, vq_mask[0]]
        uncond = torch.cat((uncon, x[:, code_start - 2:]), dim=1)
        uncond_mask = torch.cat((torch.zeros((1, uncon.size(1)), dtype=torch.bool),
                                 vq_mask[:, code_start - 2:]), dim=1)
        cond = _logits(model, x, ids)[vq_mask].view(1, -1, ids.codebook_size)
        un = _logits(model, uncond, ids)[uncond_mask].view(1, -1, ids.codebook_size)
        return (1 + cfg) * cond - cfg * un

    return _loop(x, code_start, guided, ids, steps, temperature, generator)


EDIT_TEMPLATES = {
    "image_editing": "Generate an image applying the following editing instruction based on "
                     "the original image.",
    "dense_prediction": "Perform dense prediction on the given images.",
    "control_generation": "Generate an image according to the text prompt and the given "
                          "control image.",
    "subject_generation": "Generate an image according to the text prompt and the given "
                          "object image.",
    "multi_view": "Generate a view-image based on the given image.",
    "style_transfer": "Transform the current image into the style of the provided image.",
}


def edit_prompts(prompt_text: str, edit_type: str) -> tuple[str, str]:
    """generate_image_to_image_prompt: (input prompt, unconditional prompt)."""
    t = EDIT_TEMPLATES
    if "dense" in edit_type:
        des = {"canny": "canny edge map", "hed": "hed edge map", "normal": "normal map",
               "sam2mask": "sam2 mask", "depth": "depth map", "openpose": "pose estimation map"}
        system = t["dense_prediction"]
        used = f"Generate a {des.get(edit_type.split('_')[0], 'dense map')} according to the image."
    elif "control" in edit_type:
        system, used = t["control_generation"], prompt_text
    elif "subject" in edit_type:
        system, used = t["subject_generation"], prompt_text
    elif "edit" in edit_type:
        system, used = t["image_editing"], prompt_text
    elif "ref_transfer" in edit_type:
        system = t["style_transfer"]
        used = "Transform the current image into the style of the provided image."
    elif "multi_view" in edit_type:
        system = t["multi_view"]
        used = f"Generate the {edit_type.split('_')[-1]} view based on the provided front view."
    else:
        system, used = "Generate an image according to the prompt and image.", prompt_text
    return (f"<system>{system}</system><user>{used}</user>",
            f"<system>{system}</system><user><uncondition></user>")


def edit_generate(model, encode, vq, ids, prompt: str, edit_type: str, img: Image.Image,
                  ref: Image.Image | None, steps: int, cfg_text: float, cfg_img: float,
                  temperature: float, generator: torch.Generator | None) -> torch.Tensor:
    """inference_i2i.py + generate_i2i: codes [1, N] for an image of img's size.

    img is the image to edit; for "image_ref_transfer", `ref` is the style reference (the
    official --ref_image_path), whose tokens come second."""
    input_prompt, uncon_text = edit_prompts(prompt, edit_type)
    prompt_ids, uncon_ids = encode(input_prompt), encode(uncon_text)
    if "image_ref_transfer" in edit_type:
        extra, source = image_tokens(img, vq, ids), ref
    else:
        extra, source = [], img
    input_img = image_tokens(source, vq, ids)
    con = prompt_ids[:-1] + extra + input_img + prompt_ids[-1:]
    un_text = uncon_ids[:-1] + extra + input_img + uncon_ids[-1:]
    un_img = prompt_ids
    w, h = source.size
    scale = 2 ** (len(vq.config.block_out_channels) - 1)
    gh, gw = h // scale, w // scale
    pred = [ids.boa, ids.boi] + _break_lines([ids.mask] * (gh * gw), gh, gw, ids.newline)
    code_start = len(con) + 2
    x = torch.tensor(con + pred + [ids.eoi, ids.eoa])[None]
    un_text_t, un_img_t = torch.tensor(un_text)[None], torch.tensor(un_img)[None]

    def guided(x: torch.Tensor, vq_mask: torch.Tensor) -> torch.Tensor:
        if not (cfg_text > 0 or cfg_img > 0):
            return _logits(model, x, ids)[:, vq_mask[0]]
        tail, tail_mask = x[:, code_start - 2:], vq_mask[:, code_start - 2:]
        outs = []
        for prefix in (None, un_text_t, un_img_t):
            seq = x if prefix is None else torch.cat((prefix, tail), dim=1)
            m = vq_mask if prefix is None else torch.cat(
                (torch.zeros((1, prefix.size(1)), dtype=torch.bool), tail_mask), dim=1)
            outs.append(_logits(model, seq, ids)[:, m[0]])
        cond, u_text, u_img = outs
        return cond + cfg_text * (cond - u_text) + cfg_img * (cond - u_img)

    return _loop(x, code_start, guided, ids, steps, temperature, generator)


def decode_to_pil(codes: torch.Tensor, vq, h: int, w: int) -> Image.Image:
    """decode_vq_to_image (codes without the image offset): the saved picture, 8 bits."""
    from diffusers.image_processor import VaeImageProcessor

    scale = 2 ** (len(vq.config.block_out_channels) - 1)
    with torch.no_grad():
        recon = vq.decode(codes.view(1, h, w).long(), force_not_quantize=True,
                          shape=(1, h, w, vq.config.latent_channels)).sample.clip(0, 1)
    proc = VaeImageProcessor(vae_scale_factor=scale, do_normalize=False)
    return proc.postprocess(recon.detach(), output_type="pil")[0]


def multiturn_generate(model, encode, vq, ids, turns: list[str], img: Image.Image, steps: int,
                       cfg_text: float, cfg_img: float, temperature: float,
                       seed: int) -> torch.Tensor:
    """edit_multiturn_0, _1, ...: each turn edits the picture the turn before saved, with the
    same --seed (a fresh generator each run); codes [1, N] of the last turn."""
    scale = 2 ** (len(vq.config.block_out_channels) - 1)
    for i, text in enumerate(turns):
        codes = edit_generate(model, encode, vq, ids, text, f"edit_multiturn_{i}", img, None,
                              steps, cfg_text, cfg_img, temperature,
                              torch.Generator().manual_seed(seed))
        img = decode_to_pil(codes, vq, img.size[1] // scale, img.size[0] // scale)
    return codes


def to_pil(image: np.ndarray) -> Image.Image:
    """uint8 [H, W, 3] -> PIL RGB."""
    return Image.fromarray(image, "RGB")


def crop_size_list(num_patches: int = (512 // 32) ** 2, patch_size: int = 32,
                   max_ratio: float = 4.0) -> list[tuple[int, int]]:
    """utils/image_utils.generate_crop_size_list, transcribed."""
    sizes, wp, hp = [], num_patches, 1
    while wp > 0:
        if max(wp, hp) / min(wp, hp) <= max_ratio:
            sizes.append((wp * patch_size, hp * patch_size))
        if (hp + 1) * wp <= num_patches:
            hp += 1
        else:
            wp -= 1
    return sizes


def var_crop_size(w: int, h: int, sizes: list[tuple[int, int]]) -> tuple[int, int]:
    """utils/image_utils.var_center_crop's choice with random_top_k=1 (the official call)."""
    rem = [min(cw / w, ch / h) / max(cw / w, ch / h) for cw, ch in sizes]
    return sorted(zip(rem, sizes, strict=True), reverse=True)[0][1]
