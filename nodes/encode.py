"""DiMOO VQ Encode node: IMAGE [B, H, W, 3] -> image tokens (the official VQ encoding): VQ
Encode -> VQ Decode shows what inpainting without paste-back keeps of a known region.
"""

from __future__ import annotations

import torch

from ladr_core.dimoo import FIT_MODES, check_image, fit_image

from . import host, register_node, threads
from .handles import MODEL_TYPE, TOKENS_TYPE, DiMOOModel, DiMOOTokens

io, _ = host.v3()

NODE = "DiMOO VQ Encode"


def encode_image(model: DiMOOModel, image: object, fit: str = "exact") -> DiMOOTokens:
    """IMAGE -> DiMOOTokens (CPU codes [B, h*w]); ValueError naming `image` or `fit`, raised
    before the VQ loads."""
    if fit not in FIT_MODES:
        raise ValueError(f"{NODE}: fit {fit!r} is not one of {list(FIT_MODES)}; pick one in "
                         "the fit list")
    pipe = model.pipe
    factor = pipe.vq_factor
    try:
        if isinstance(image, torch.Tensor) and image.dim() == 4 and image.shape[-1] == 3:
            image = fit_image(image, factor, fit)
        image = check_image(image, factor, "image", fix="set fit to crop or resize")
    except ValueError as exc:
        raise ValueError(f"{NODE}: {exc}") from None
    # one image at a time; the encoder mirrors the decoder, so one decode's memory bounds it
    host.load_to_device(model.patcher, pipe.decode_bytes(image.shape[2], image.shape[1]),
                        vq_only=True)
    with torch.inference_mode(), threads.torch_threads():
        codes = pipe.encode_image(image).detach().cpu()
    h, w = image.shape[1] // factor, image.shape[2] // factor
    return DiMOOTokens(tokens=codes, grid=(h, w), width=image.shape[2], height=image.shape[1],
                       model_key=model.key, stats={"encoded": int(codes.shape[0])})


@register_node(menu=140)
class DiMOOVQEncode(io.ComfyNode):
    """Encode an IMAGE to DiMOO image tokens with the checkpoint's VQ encoder."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="LADR_DiMOOVQEncode",
            display_name="DiMOO VQ Encode",
            category="LADR",
            search_aliases=["vq", "encode", "dimoo", "image to tokens"],
            description="Turns an IMAGE into DiMOO image tokens (the official encoding). "
            "Connect to DiMOO VQ Decode to see what the VQ keeps of the image.",
            inputs=[
                io.Custom(MODEL_TYPE).Input("model", tooltip="From Load DiMOO Model."),
                io.Image.Input("image", tooltip="Sides must be multiples of the VQ factor "
                               "(16 px on Lumina-DiMOO, 4 px on dimoo-nano), or set fit."),
                io.Combo.Input("fit", options=list(FIT_MODES), default="exact",
                               tooltip="exact = refuse an image off the VQ grid, naming the "
                               "nearest sizes; crop = centre crop; resize = to the nearest "
                               "valid sizes."),
            ],
            outputs=[io.Custom(TOKENS_TYPE).Output("tokens", tooltip="-> DiMOO VQ Decode.")],
        )

    @classmethod
    def execute(cls, model: DiMOOModel, image: object, fit: str = "exact") -> io.NodeOutput:
        return io.NodeOutput(encode_image(model, image, fit))
