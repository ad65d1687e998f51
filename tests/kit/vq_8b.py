"""Lumina-DiMOO's VQ configuration, the 8B checkpoint's image tokenizer, for shape-only builds on
the CUDA emulation (lab/benchmarks/gpu_estimate/vqdecode.py, tests/emulation/test_put_back_cards.py):
aMUSEd's VQ as published (huggingface.co/amused/amused-512, ``vqvae/config.json``), which
Lumina-DiMOO's technical report (arXiv 2510.06308) names; a VQ factor of 16 and 8192 codes, as the
pack reads from the official checkpoint."""

from __future__ import annotations

from typing import Any

VQ_SOURCE = ("aMUSEd's VQ, the tokenizer Lumina-DiMOO's technical report (arXiv 2510.06308) "
             "names, as configured in huggingface.co/amused/amused-512 `vqvae/config.json` "
             "(factor 16, 8192 codes)")
VQ_CONFIG: dict[str, Any] = {
    "act_fn": "silu", "block_out_channels": [128, 256, 256, 512, 768],
    "down_block_types": ["DownEncoderBlock2D"] * 5, "in_channels": 3, "latent_channels": 64,
    "layers_per_block": 2, "lookup_from_codebook": True, "mid_block_add_attention": False,
    "norm_num_groups": 32, "norm_type": "group", "num_vq_embeddings": 8192, "out_channels": 3,
    "sample_size": 32, "scaling_factor": 0.18215, "up_block_types": ["UpDecoderBlock2D"] * 5,
    "vq_embed_dim": None, "force_upcast": True,
}
