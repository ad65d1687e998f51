"""DiMOO VQ Decode node: image tokens -> IMAGE [B, H, W, 3] float32 in [0, 1] (ComfyUI layout)."""

from __future__ import annotations

import torch

from . import host, register_node, threads
from .handles import MODEL_TYPE, TOKENS_TYPE, DiMOOModel, DiMOOTokens

io, _ = host.v3()

NODE = "DiMOO VQ Decode"
# Load DiMOO Model's key (nodes/loader.py): (folder, its mtime, dtype, device[, weight_dtype])
KEY_PARTS = ("checkpoint", "checkpoint", "dtype", "device", "weight_dtype")


def key_mismatch(tokens: DiMOOTokens, model: DiMOOModel) -> str:
    """How the model that made ``tokens`` differs from ``model`` (codebook or settings), and the fix."""
    made = "were encoded (DiMOO VQ Encode)" if "encoded" in tokens.stats else "were sampled"
    mine, theirs = tuple(model.key), tuple(tokens.model_key)
    if len(mine) < 2 or len(theirs) < 2 or mine[:2] != theirs[:2]:
        return (f"{made} with another checkpoint than {model.name!r} (another codebook); "
                "connect VQ Decode to the same Load DiMOO Model as the node that made them")
    diffs = [f"{KEY_PARTS[i]} {theirs[i] if i < len(theirs) else 'default'} there, "
             f"{mine[i] if i < len(mine) else 'default'} here"
             for i in range(2, max(len(mine), len(theirs)))
             if (mine[i] if i < len(mine) else None) != (theirs[i] if i < len(theirs) else None)]
    return (f"{made} by a Load DiMOO Model of the same checkpoint with other settings "
            f"({'; '.join(diffs)}); connect VQ Decode to that same Load DiMOO Model, or give "
            "both loaders the same settings")


def decode_tokens(model: DiMOOModel, tokens: DiMOOTokens) -> torch.Tensor:
    """`pipe.decode(tokens [B, h*w], grid)` on the model's device -> CPU float [B, H, W, 3];
    inpainted / outpainted tokens get the original pixels pasted back (their PaintPlan)."""
    if tokens.model_key != model.key:
        raise ValueError(f"{NODE}: tokens {key_mismatch(tokens, model)}")
    host.load_to_device(model.patcher, model.pipe.decode_bytes(
        tokens.width, tokens.height, int(tokens.tokens.shape[0])), vq_only=True)
    # one image at a time through the decoder, the batch's images kept on the device
    with torch.inference_mode(), threads.torch_threads():
        images = model.pipe.decode(tokens.tokens, tokens.grid)
    images = images.detach().float().clamp(0.0, 1.0).cpu()
    if tokens.paint is not None:  # inpaint / outpaint: the original pixels back, if asked
        images = tokens.paint.finish(images).float().cpu()
    expected = (tokens.tokens.shape[0], tokens.height, tokens.width, 3)
    if tuple(images.shape) != expected:
        raise RuntimeError(f"VQ decode returned {tuple(images.shape)}, expected {expected}")
    return images.contiguous()


@register_node(menu=100)
class DiMOOVQDecode(io.ComfyNode):
    """Decode DiMOO image tokens to pixels with the checkpoint's VQ decoder."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="LADR_DiMOOVQDecode",
            display_name="DiMOO VQ Decode",
            category="LADR",
            search_aliases=["vq", "decode", "dimoo", "tokens to image"],
            description="Turns sampled DiMOO tokens into an IMAGE batch with the VQ decoder.",
            inputs=[
                io.Custom(MODEL_TYPE).Input("model", tooltip="The same model that sampled."),
                io.Custom(TOKENS_TYPE).Input("tokens", tooltip="From DiMOO Sampler."),
            ],
            outputs=[io.Image.Output("image", tooltip="[B, H, W, 3] in [0, 1].")],
        )

    @classmethod
    def execute(cls, model: DiMOOModel, tokens: DiMOOTokens) -> io.NodeOutput:
        return io.NodeOutput(decode_tokens(model, tokens))
