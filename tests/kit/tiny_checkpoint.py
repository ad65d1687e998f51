"""Writes a tiny random Lumina-DiMOO checkpoint in the official folder layout (CPU, < 1 s), for
the tests and the benchmarks that need a checkpoint without the nano model.

Layout: config.json (model_type "llada", explicit DiMOO id keys over a compact vocab, plus an
``auto_map`` pointing at a booby-trapped .py), two safetensors shards + model.safetensors.index.json
with official parameter names, tokenizer.json / tokenizer_config.json carrying DiMOO's special
tokens, and ``vqvae/`` saved by diffusers ``VQModel.save_pretrained`` (VQ factor 4, 32 codes);
with ``vq=False`` only ``vqvae/config.json`` (the VQ factor, for a machine without diffusers that
samples tokens only).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from ladr_core.dimoo.model.config import DiMOOIds, LLaDAConfig
from ladr_core.dimoo.model.transformer import LLaDAModel

WORDS = ["a", "red", "blue", "green", "circle", "square", "left", "of", "right", "the", "on",
         "Generate", "an", "image", "according", "to", "text", "prompt", "."]
SPECIALS = ["<|pad|>", "[UNK]", "<|mdm_mask|>", "<newline>", "<boa>", "<eoa>", "<boi>", "<eoi>",
            "<uncondition>", "<system>", "</system>", "<user>", "</user>"]
CODEBOOK = 32
VQ_FACTOR = 4
MARKER = "CODE_FROM_MODEL_FOLDER_RAN"

EVIL_PY = f'''
from pathlib import Path
Path(__file__).with_name("{MARKER}").write_text("executed")
raise RuntimeError("code from the model folder must never run")
'''


def tiny_vocab() -> tuple[dict[str, int], DiMOOIds, int]:
    vocab = {tok: i for i, tok in enumerate(SPECIALS + WORDS)}
    offset = len(vocab)
    ids = DiMOOIds(mask=vocab["<|mdm_mask|>"], newline=vocab["<newline>"], image_offset=offset,
                   boa=vocab["<boa>"], eoa=vocab["<eoa>"], boi=vocab["<boi>"], eoi=vocab["<eoi>"],
                   uncondition=vocab["<uncondition>"], codebook_size=CODEBOOK)
    return vocab, ids, offset + CODEBOOK


def tiny_config(vocab_size: int) -> LLaDAConfig:
    return LLaDAConfig(d_model=32, n_heads=4, n_kv_heads=2, n_layers=2, mlp_hidden_size=48,
                       vocab_size=vocab_size, embedding_size=vocab_size, max_sequence_length=256,
                       rope_theta=500000.0)


def write_tokenizer(folder: Path, vocab: dict[str, int]) -> None:
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS])
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "pad_token": "<|pad|>",
        "unk_token": "[UNK]", "auto_map": {"AutoTokenizer": ["tokenization_evil.Tok", None]},
    }))


def write_vqvae(folder: Path, seed: int) -> None:
    from diffusers import VQModel

    torch.manual_seed(seed)
    blocks = 3  # VQ factor 2 ** (blocks - 1) = 4
    vq = VQModel(down_block_types=("DownEncoderBlock2D",) * blocks,
                 up_block_types=("UpDecoderBlock2D",) * blocks, block_out_channels=(8,) * blocks,
                 layers_per_block=1, latent_channels=4, num_vq_embeddings=CODEBOOK,
                 norm_num_groups=4, sample_size=32, mid_block_add_attention=False,
                 lookup_from_codebook=True)
    with torch.no_grad():
        vq.quantize.embedding.weight.normal_(0.0, 1.0)
    vq.save_pretrained(str(folder / "vqvae"), safe_serialization=True)


def write_vq_config(folder: Path) -> None:
    """``vqvae/config.json`` alone: what ``write_vqvae`` would write about the shape (VQ factor
    4, 32 codes), no weights."""
    (folder / "vqvae").mkdir(parents=True, exist_ok=True)
    (folder / "vqvae" / "config.json").write_text(json.dumps({
        "_class_name": "VQModel", "block_out_channels": [8, 8, 8],
        "num_vq_embeddings": CODEBOOK, "latent_channels": 4, "lookup_from_codebook": True}))


def write_tiny_checkpoint(folder: Path, seed: int = 0, shards: int = 2, vq: bool = True) -> Path:
    """Write the tiny checkpoint into ``folder`` (created) and return it (``vq=False``: the VQ's
    config only, no diffusers needed)."""
    folder.mkdir(parents=True, exist_ok=True)
    vocab, ids, vocab_size = tiny_vocab()
    cfg = tiny_config(vocab_size)
    torch.manual_seed(seed)
    model = LLaDAModel(cfg, init_std=0.3)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    names = sorted(state)
    weight_map: dict[str, str] = {}
    for i in range(shards):
        fname = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        part = {k: state[k] for k in names[i::shards]}
        save_file(part, str(folder / fname), metadata={"format": "pt"})
        weight_map.update({k: fname for k in part})
    total = sum(v.numel() * v.element_size() for v in state.values())
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=1))
    config = {**cfg.to_dict(), **ids.to_config_dict(), "default_image_size": 32,
              "architectures": ["LLaDAForMultiModalGeneration"],
              "auto_map": {"AutoConfig": "modeling_evil.Cfg", "AutoModel": "modeling_evil.Model"}}
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    for evil in ("modeling_evil.py", "tokenization_evil.py", "__init__.py"):
        (folder / evil).write_text(EVIL_PY)
    write_tokenizer(folder, vocab)
    if vq:
        write_vqvae(folder, seed)
    else:
        write_vq_config(folder)
    return folder
