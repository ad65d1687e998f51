"""A folder laid out like a download of the real ``Alpha-VLLM/Lumina-DiMOO`` repository, with
tiny dimensions, and its variants over what nobody here has seen.

What public sources show of the real repository: the language model at the root (sharded
safetensors + ``model.safetensors.index.json``, ``config.json`` with LLaDA-8B's fields, the
tokenizer files), the VQ-VAE in ``vqvae/``, ``args.json``, ``model_index.json``, remote-code
``.py`` files, and the ``.cache/huggingface/`` folder ``huggingface-cli download --local-dir``
leaves. ``write_repo`` writes that: LLaDA-8B's config.json values (``max_sequence_length``
4096, ``rope_theta`` 500000, ``mask_token_id`` 126336, ``eos_token_id`` 126081, no DiMOO id
keys) with d_model 32 and 2 layers, the official 8192-code VQ (tiny channels, VQ factor 4) and
a byte-level BPE tokenizer trained here. The unknowns vary by ``Variant``:

* ``tokenizer``: "json" (tokenizer.json + a PreTrainedTokenizerFast tokenizer_config.json, as
  LLaDA-8B ships), "slow" (vocab.json + merges.txt, GPT2Tokenizer, no tokenizer.json), "both",
  "broken-json" (an unparsable tokenizer.json beside the slow files);
* ``uncondition_token``: whether ``<uncondition>`` is an added token (else it is plain text);
* ``vq``: the VQ weights' form (a name ``vqfiles`` reads, "sharded", or "pickle");
* ``width``: the logits width (134548 = 126356 + 8192, or 134656, padded to a multiple of 128).

Weights are stored in bf16 (as the release); every ``.py`` raises if imported.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import save_file

from ladr_core.dimoo.model.config import LLaDAConfig
from ladr_core.dimoo.model.transformer import LLaDAModel

from .tiny_checkpoint import EVIL_PY

__all__ = ["CORPUS", "TEMPLATE_SPECIALS", "VQ_FORMS", "Variant", "copy_repo", "write_repo",
           "write_tokenizer"]

#: LLaDA-8B's config.json (GSAI-ML/LLaDA-8B-Instruct), the size fields made tiny below
LLADA_8B = {
    "activation_type": "silu", "alibi": False, "alibi_bias_max": 8.0,
    "attention_dropout": 0.0, "attention_layer_norm": False,
    "attention_layer_norm_with_affine": True, "bias_for_layer_norm": False,
    "block_group_size": 1, "block_type": "llama", "d_model": 4096, "embedding_dropout": 0.0,
    "embedding_size": 126464, "eos_token_id": 126081, "flash_attention": False,
    "include_bias": False, "include_qkv_bias": False, "init_cutoff_factor": None,
    "init_device": "meta", "init_fn": "mitchell", "init_std": 0.02, "input_emb_norm": False,
    "layer_norm_type": "rms", "layer_norm_with_affine": True, "mask_token_id": 126336,
    "max_sequence_length": 4096, "mlp_hidden_size": 12288, "mlp_ratio": 4,
    "model_type": "llada", "multi_query_attention": None, "n_heads": 32, "n_kv_heads": 32,
    "n_layers": 32, "pad_token_id": 126081, "precision": "amp_bf16", "residual_dropout": 0.0,
    "rms_norm_eps": 1e-05, "rope": True, "rope_full_precision": True, "rope_theta": 500000.0,
    "scale_logits": False, "transformers_version": "4.46.3", "use_cache": False,
    "vocab_size": 126464, "weight_tying": False,
}
TINY = {"d_model": 32, "n_heads": 4, "n_kv_heads": 4, "n_layers": 2, "mlp_hidden_size": 64}
TEMPLATE_SPECIALS = ["<system>", "</system>", "<user>", "</user>"]
CORPUS = ["Generate an image according to the text prompt.", "a red circle left of a blue "
          "square", "a photo of a cat on the table", "Generate an image applying the following "
          "editing instruction based on the original image."]
VQ_FORMS = ("diffusion_pytorch_model.safetensors", "model.safetensors",
            "diffusion_pytorch_model.fp16.safetensors", "sharded", "pickle")


@dataclass(frozen=True)
class Variant:
    tokenizer: str = "json"
    uncondition_token: bool = True
    vq: str = "diffusion_pytorch_model.safetensors"
    width: int = 126356 + 8192

    @property
    def name(self) -> str:
        return (f"{self.tokenizer}-{'unc' if self.uncondition_token else 'plain'}-"
                f"{self.vq.replace('.', '_')}-{self.width}")


def write_tokenizer(folder: Path, kind: str, uncondition_token: bool = True) -> None:
    """A byte-level BPE trained on CORPUS, written as ``kind`` says (module docstring)."""
    from tokenizers import AddedToken, ByteLevelBPETokenizer

    for old in ("tokenizer.json", "vocab.json", "merges.txt", "tokenizer_config.json",
                "special_tokens_map.json"):  # unlinked, not overwritten: copies share them
        (folder / old).unlink(missing_ok=True)
    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator(CORPUS * 8, vocab_size=320, min_frequency=1,
                            special_tokens=["<|endoftext|>"], show_progress=False)
    specials = TEMPLATE_SPECIALS + (["<uncondition>"] if uncondition_token else [])
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    vocab = tok.get_vocab()
    added = {str(vocab[s]): {"content": s, "special": True, "normalized": False,
                             "lstrip": False, "rstrip": False, "single_word": False}
             for s in ["<|endoftext|>", *specials]}
    config = {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
              "pad_token": "<|endoftext|>", "unk_token": "<|endoftext|>", "add_bos_token": False,
              "added_tokens_decoder": added, "additional_special_tokens": specials,
              "model_max_length": 1 << 60, "clean_up_tokenization_spaces": False,
              "auto_map": {"AutoTokenizer": ["tokenization_llada.LLaDATokenizer", None]}}
    if kind in ("json", "both"):
        tok.save(str(folder / "tokenizer.json"))
    if kind in ("slow", "both", "broken-json"):
        tok.save_model(str(folder))  # vocab.json, merges.txt
    if kind == "broken-json":
        (folder / "tokenizer.json").write_text('{"version": "9.9", "model": ')
    config["tokenizer_class"] = "PreTrainedTokenizerFast" if kind == "json" else "GPT2Tokenizer"
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=1))
    (folder / "special_tokens_map.json").write_text(json.dumps(
        {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
         "additional_special_tokens": specials}))


def _vq(seed: int) -> torch.nn.Module:
    from diffusers import VQModel

    torch.manual_seed(seed)
    vq = VQModel(down_block_types=("DownEncoderBlock2D",) * 3,
                 up_block_types=("UpDecoderBlock2D",) * 3, block_out_channels=(8,) * 3,
                 layers_per_block=1, latent_channels=4, num_vq_embeddings=8192,
                 norm_num_groups=4, sample_size=32, mid_block_add_attention=False,
                 lookup_from_codebook=True)
    with torch.no_grad():
        vq.quantize.embedding.weight.normal_(0.0, 1.0)
    return vq


def write_vq(folder: Path, form: str, seed: int = 0) -> None:
    """``vqvae/``: diffusers' config.json and the weights in ``form`` (VQ_FORMS)."""
    vq_dir = folder / "vqvae"
    if vq_dir.exists():
        shutil.rmtree(vq_dir)
    vq = _vq(seed)
    vq.save_pretrained(str(vq_dir), safe_serialization=True)
    plain = vq_dir / "diffusion_pytorch_model.safetensors"
    plain.unlink()
    state = {k: v.contiguous() for k, v in vq.state_dict().items()}
    if form == "pickle":
        torch.save(state, str(vq_dir / "diffusion_pytorch_model.bin"))
    elif form == "sharded":
        names = sorted(state)
        weight_map = {}
        for i in range(2):
            fname = f"diffusion_pytorch_model-{i + 1:05d}-of-00002.safetensors"
            save_file({k: state[k] for k in names[i::2]}, str(vq_dir / fname))
            weight_map.update(dict.fromkeys(names[i::2], fname))
        (vq_dir / "diffusion_pytorch_model.safetensors.index.json").write_text(
            json.dumps({"metadata": {}, "weight_map": weight_map}))
    else:
        half = ".fp16." in form
        save_file({k: v.half() if half else v for k, v in state.items()}, str(vq_dir / form))


def _write_model(folder: Path, width: int, seed: int) -> None:
    raw = {**LLADA_8B, **TINY, "vocab_size": width, "embedding_size": width,
           "architectures": ["LLaDAForMultiModalGeneration"],
           "auto_map": {"AutoConfig": "configuration_llada.LLaDAConfig",
                        "AutoModel": "modeling_llada.LLaDAForMultiModalGeneration"}}
    cfg = LLaDAConfig.from_dict(raw)
    torch.manual_seed(seed)
    state = {k: v.to(torch.bfloat16).contiguous()
             for k, v in LLaDAModel(cfg, init_std=0.3).state_dict().items()}
    names = sorted(state)
    weight_map: dict[str, str] = {}
    for i in range(2):
        fname = f"model-{i + 1:05d}-of-00002.safetensors"
        save_file({k: state[k] for k in names[i::2]}, str(folder / fname), {"format": "pt"})
        weight_map.update(dict.fromkeys(names[i::2], fname))
    total = sum(v.numel() * v.element_size() for v in state.values())
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=1))
    (folder / "config.json").write_text(json.dumps(raw, indent=1))


def _write_extras(folder: Path) -> None:
    """args.json, model_index.json, README, remote-code .py files and the download cache."""
    (folder / "args.json").write_text(json.dumps({"model": "LLaDA-8B", "resolution": 1024}))
    (folder / "model_index.json").write_text(json.dumps(
        {"_class_name": "LuminaDiMOOPipeline", "vqvae": ["diffusers", "VQModel"]}))
    (folder / "README.md").write_text("---\nlicense: apache-2.0\n---\n# Lumina-DiMOO\n")
    (folder / ".gitattributes").write_text("*.safetensors filter=lfs diff=lfs merge=lfs -text\n")
    for name in ("modeling_llada.py", "configuration_llada.py", "tokenization_llada.py",
                 "__init__.py"):
        (folder / name).write_text(EVIL_PY)
    cache = folder / ".cache" / "huggingface"
    (cache / "download" / "vqvae").mkdir(parents=True)
    (cache / ".gitignore").write_text("*\n")
    for name in ("config.json", "model-00001-of-00002.safetensors", "vqvae/config.json"):
        (cache / "download" / f"{name}.metadata").write_text("0123abcd\nsha\n1700000000.0\n")
    (cache / "download" / "model-00002-of-00002.safetensors.lock").write_text("")


def write_repo(folder: Path, variant: Variant = Variant(), seed: int = 0) -> Path:
    """The real-looking repository (module docstring) in ``folder`` (created), as ``variant``
    says; returns ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    _write_model(folder, variant.width, seed)
    write_tokenizer(folder, variant.tokenizer, variant.uncondition_token)
    write_vq(folder, variant.vq, seed)
    _write_extras(folder)
    return folder


def copy_repo(source: Path, target: Path) -> Path:
    """A copy of ``source`` whose big files are hard links (edit by replacing files only)."""
    return Path(shutil.copytree(source, target, copy_function=os.link))
