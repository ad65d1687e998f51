"""The shipped templates' names and view, which the builder (lab/workflows/build_examples.py)
writes and the product's tests hold example_workflows/ to.

TEMPLATE_FILES: the file name of each UI template, which ComfyUI's template browser shows as its
title (frontend 1.49 gives a custom pack's template no other title or description). The API twins
in example_workflows/api/ keep the short names scripts use."""

from __future__ import annotations

TEMPLATE_FILES = {
    "ladr_nano_text_to_image": "Text to image (nano, CPU)",
    "ladr_vs_baseline_side_by_side": "LADR vs official sampler (nano)",
    "ladr_batch_of_prompts": "Batch of prompts (nano)",
    "ladr_nano_inpaint_mask_editor": "Inpaint with the mask editor (nano)",
    "ladr_nano_outpaint_pad_image": "Outpaint with Pad Image (nano)",
    "ladr_dimoo_edit_real_model": "Edit an image (Lumina-DiMOO 8B)",
    "ladr_dimoo_1024_real_model": "1024 px image (Lumina-DiMOO 8B)",
    "ladr_distributed_seed_collector": "One image per server (Distributed)",
    "ladr_nano_img2img_strengths": "Image to image, 3 strengths (nano)",
    "ladr_nano_caption_to_image": "Caption, then draw it (nano, CPU)",
    "ladr_emoji_text_to_image": "Text to image (emoji, CPU)",
}
"""API name -> UI file name (without .json), as the template browser titles it: one line of a
card (about 36 characters at frontend 1.49's card width; longer ones are cut with an ellipsis)."""

VIEW_METHOD = "nearest-exact"
"""How nano's 48 px results are enlarged for a person to judge (ComfyUI's Upscale Image By):
every pixel a block."""
