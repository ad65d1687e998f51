"""tests/kit/tiny_checkpoint.py without its VQ weights (``vq=False``): what a machine without
diffusers samples tokens from (lab/benchmarks/gpu_check loads it model-only)."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from ladr_core.dimoo.weights.checkpoint import load_transformer
from ladr_core.dimoo.weights.files import read_config
from ladr_core.dimoo.weights.tokenizer import load_tokenizer
from tests.kit.tiny_checkpoint import write_tiny_checkpoint


def test_a_checkpoint_without_vq_weights_keeps_the_vq_shape_and_loads_model_only(
        tmp_path: Path) -> None:
    with_vq = write_tiny_checkpoint(tmp_path / "full")
    without = write_tiny_checkpoint(tmp_path / "tokens", vq=False)
    assert not (without / "vqvae" / "diffusion_pytorch_model.safetensors").exists()
    full, short = (json.loads((f / "vqvae" / "config.json").read_text()) for f in (with_vq, without))
    for key in ("block_out_channels", "num_vq_embeddings", "latent_channels"):
        assert short[key] == list(full[key]) if isinstance(full[key], list) else full[key]
    config, ids, _ = read_config(without)
    model = load_transformer(without, config, torch.float32, torch.device("cpu"))
    same = load_transformer(with_vq, config, torch.float32, torch.device("cpu"))
    for (name, a), (_, b) in zip(model.state_dict().items(), same.state_dict().items(),
                                 strict=True):
        assert torch.equal(a, b), name  # the same seed, the same transformer
    assert load_tokenizer(without, ids).encode("<uncondition>").ids == [ids.uncondition]
