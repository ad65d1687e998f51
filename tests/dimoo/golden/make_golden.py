"""Regenerate tests/dimoo/golden/llada_tiny_*.safetensors from the OFFICIAL Lumina-DiMOO modeling code.

Run by hand (never in CI); the official code is read from a local checkout and is not part of
this repository:

    git -C <Lumina-DiMOO checkout> show HEAD:model/modeling_llada.py  # etc., into <dir>/model/
    .venv/bin/python tests/dimoo/golden/make_golden.py <dir>

<dir> must contain ``model/{__init__,configuration_llada,modeling_llada,modeling_xllmx_dimoo}.py``
copied from https://github.com/Alpha-VLLM/Lumina-DiMOO. For each tiny variant this script builds
the official ``LLaDAForMultiModalGeneration`` in float32 with seeded random weights (wider than
the training init so the comparison is discriminative), runs it on fixed token ids through the
path the official generator uses (``model(ids, infer=True).logits``), checks the native model on
the same weights, and saves weights (official names), ids and logits.

``llada_tiny_mlcache.safetensors`` freezes the official ML-Cache path: a full cached pass on
``golden.seq1`` (``caching(True)``, ``use_cache=True``), then a cached step on ``golden.seq2``
recomputing only ``golden.compute_index`` (``to_compute_mask``); ``golden.logits`` are the
official logits at those positions. (The official cache needs n_kv_heads == n_heads.)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from ladr_core.dimoo.model.config import LLaDAConfig  # noqa: E402
from ladr_core.dimoo.model.transformer import LLaDAModel  # noqa: E402

BASE = dict(
    model_type="llada", architectures=["LLaDAModelLM"], d_model=32, n_heads=4, n_kv_heads=2,
    n_layers=2, mlp_hidden_size=48, mlp_ratio=4, activation_type="silu", block_type="llama",
    layer_norm_type="rms", rms_norm_eps=1e-5, rope=True, rope_theta=500000.0,
    vocab_size=96, embedding_size=96, max_sequence_length=64, weight_tying=False,
    include_bias=False, include_qkv_bias=False, attention_dropout=0.0, residual_dropout=0.0,
    embedding_dropout=0.0, init_device="cpu", mask_token_id=90,
)
VARIANTS = {
    "base": BASE,
    "bias_tied": {**BASE, "include_bias": True, "weight_tying": True, "n_kv_heads": 4,
                  "rope_theta": 10000.0, "input_emb_norm": True, "rms_norm_eps": 1e-6},
    # bfloat16 weights and activations, RoPE in bfloat16 (rope_full_precision false)
    "bf16_rope_lowprec": {**BASE, "rope_full_precision": False},
}
DTYPES = {"bf16_rope_lowprec": torch.bfloat16}
SEED = 1234


def build_official(official_dir: Path, cfg: dict) -> torch.nn.Module:
    sys.path.insert(0, str(official_dir))
    from model import LLaDAForMultiModalGeneration  # official code, local only
    from model.configuration_llada import LLaDAConfig as OfficialConfig

    torch.manual_seed(SEED)
    model = LLaDAForMultiModalGeneration(OfficialConfig(**cfg), init_params=True).float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_((1.0 + 0.1 * torch.randn_like(p)) if "norm" in name or "ln_f" in name
                    else 0.3 * torch.randn_like(p))
    return model


def main(official_dir: Path) -> None:
    for variant, cfg in VARIANTS.items():
        dtype = DTYPES.get(variant, torch.float32)
        official = build_official(official_dir, cfg).to(dtype)
        gen = torch.Generator().manual_seed(SEED + 1)
        ids = torch.randint(0, cfg["vocab_size"], (2, 12), generator=gen)
        with torch.no_grad():
            expected = official(ids, infer=True).logits
        state = {k: v.detach().clone().contiguous() for k, v in official.state_dict().items()}
        native = LLaDAModel(LLaDAConfig.from_dict(cfg), init_std=None).to(dtype)
        native.load_state_dict(state, strict=True)
        with torch.no_grad():
            diff = (native.eval()(ids).float() - expected.float()).abs().max().item()
        print(f"{variant}: official vs native max abs diff = {diff:.3e}")
        assert diff <= 1e-4, diff
        tensors = {**state, "golden.input_ids": ids, "golden.logits": expected}
        save_file(tensors, str(HERE / f"llada_tiny_{variant}.safetensors"),
                  metadata={"config": json.dumps(cfg), "seed": str(SEED),
                            "max_abs_diff_at_creation": f"{diff:.3e}"})


def main_mlcache(official_dir: Path) -> None:
    cfg = {**BASE, "n_kv_heads": 4}
    official = build_official(official_dir, cfg)
    gen = torch.Generator().manual_seed(SEED + 2)
    seq1 = torch.randint(0, cfg["vocab_size"], (1, 20), generator=gen)
    seq2 = seq1.clone()
    seq2[0, [3, 9, 15]] = torch.tensor([90, 91, 92])
    index = torch.tensor([[2, 3, 9, 11, 15]])
    compute = torch.zeros(1, 20, dtype=torch.bool)
    compute[0, index[0]] = True
    official.caching(True)
    with torch.no_grad():
        official(seq1, infer=True, use_cache=True, cat="cond")
        logits = official(seq2, infer=True, use_cache=True, to_compute_mask=compute, cat="cond").logits
    expected = logits[0, index[0]].float()[None].clone()
    state = {k: v.detach().clone().contiguous() for k, v in official.state_dict().items()}
    native = LLaDAModel(LLaDAConfig.from_dict(cfg), init_std=None).eval()
    native.load_state_dict(state, strict=True)
    with torch.no_grad():
        _, kv = native.hidden_states(seq1, return_kv=True)
        got = native.project(native.hidden_states_partial(seq2, index, kv))
    diff = (got - expected).abs().max().item()
    print(f"mlcache: official vs native cached-step max abs diff = {diff:.3e}")
    assert diff <= 1e-4, diff
    tensors = {**state, "golden.seq1": seq1, "golden.seq2": seq2, "golden.compute_index": index,
               "golden.logits": expected}
    save_file(tensors, str(HERE / "llada_tiny_mlcache.safetensors"),
              metadata={"config": json.dumps(cfg), "seed": str(SEED),
                        "max_abs_diff_at_creation": f"{diff:.3e}"})


if __name__ == "__main__":
    main(Path(sys.argv[1]))
    main_mlcache(Path(sys.argv[1]))
