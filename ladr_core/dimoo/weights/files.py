"""What every reader of a checkpoint shares (checkpoint.py, quant_load.py, gguf.py, the converter
and the input ranges): the errors, config.json, the shard index and its tensors, dtype and
device names (the tokenizer: tokenizer.py; the VQ files: vqfiles.py). Nothing here runs code
from the folder: pickle weights are refused and ``trust_remote_code`` is never used.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..model.config import ConfigError, DiMOOIds, LLaDAConfig
from ..model.transformer import LLaDAModel

__all__ = ["CheckpointError", "DTYPES", "HUB_HINT", "INDEX_FILE", "LoadedCheckpoint",
           "PICKLE_SUFFIXES", "SINGLE_FILE", "TEMPLATE_TOKENS",
           "check_vq_config", "config_value", "get_tensor",
           "open_shard", "parse_config", "read_config", "read_json",
           "resolve_device", "resolve_dtype", "shard_files"]

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
HUB_HINT = "download the full Alpha-VLLM/Lumina-DiMOO repository (huggingface-cli download)"
#: tokens the official template writes literally (prompt_utils.generate_text_to_image_prompt)
TEMPLATE_TOKENS = ("<system>", "</system>", "<user>", "</user>", "<uncondition>")
DTYPES = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16,
          "float16": torch.float16, "fp32": torch.float32, "float32": torch.float32}
class CheckpointError(RuntimeError):
    """The model folder is incomplete or invalid; the message names the file and the fix."""


@dataclass
class LoadedCheckpoint:
    transformer: LLaDAModel
    config: LLaDAConfig
    ids: DiMOOIds
    tokenizer: Any  # tokenizers.Tokenizer, or weights.tokenizer.HFTokenizer (same encode/decode)
    vq: Any  # diffusers.VQModel
    vq_factor: int
    raw_config: dict[str, Any]
    folder: Path | None = None  # where it was loaded from (save_dimoo copies the other files)


def resolve_dtype(dtype: torch.dtype | str) -> torch.dtype:
    """torch.bfloat16 / float16 / float32 or their names ("bf16", "fp16", "fp32")."""
    if isinstance(dtype, str):
        if dtype.lower() not in DTYPES:
            raise ValueError(f"dtype {dtype!r} is not supported; use one of {sorted(DTYPES)}")
        return DTYPES[dtype.lower()]
    if dtype not in (torch.bfloat16, torch.float16, torch.float32):
        raise ValueError(f"dtype {dtype} is not supported; use torch.bfloat16, float16 or float32")
    return dtype


def read_json(path: Path, what: str) -> dict[str, Any]:
    if not path.is_file():
        raise CheckpointError(f"{path} is missing ({what}); {HUB_HINT}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path} is not valid JSON ({exc}); re-download it") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} must hold a JSON object; re-download it")
    return data


def read_config(folder: Path) -> tuple[LLaDAConfig, DiMOOIds, dict[str, Any]]:
    """Parse config.json: LLaDA architecture + DiMOO ids (model/config.py's rule)."""
    path = folder / "config.json"
    raw = read_json(path, "the LLaDA model config")
    config, ids = parse_config(raw, str(path))
    return config, ids, raw


def config_value(raw: dict[str, Any], key: str, default: Any, ok: Callable[[Any], bool],
                 what: str) -> Any:
    """A key of ours in config.json (``default`` when absent); a present but bad value is a
    CheckpointError naming the key."""
    value = raw.get(key, default)
    if not ok(value):
        raise CheckpointError(f"config.json: {key} must be {what} (got {value!r}); fix or delete "
                              f"the key (absent = {default})")
    return value


def parse_config(raw: dict[str, Any], source: str) -> tuple[LLaDAConfig, DiMOOIds]:
    """A config.json dict -> (LLaDAConfig, DiMOOIds); CheckpointError naming ``source``."""
    try:
        config = LLaDAConfig.from_dict(raw, source=source)
        ids = DiMOOIds.from_config_dict(raw, source=source, width=config.n_embeddings)
        ids.validate_against(config.n_embeddings, source=source)
    except ConfigError as exc:
        raise CheckpointError(str(exc)) from None
    return config, ids


#: VQ-VAE config sizes -> largest accepted (far above the real one's; a lying config.json
#: must not make diffusers build a huge model before any weight is read)
_VQ_SIZES = {"in_channels": 64, "out_channels": 64, "latent_channels": 1 << 12,
             "layers_per_block": 16, "norm_num_groups": 1 << 10, "num_vq_embeddings": 1 << 20,
             "sample_size": 1 << 14}


def check_vq_config(config: dict[str, Any], source: str) -> list[int]:
    """The VQ config's block_out_channels after checking every size field by type and range;
    CheckpointError naming ``source`` and the field."""
    def bad(key: str, why: str) -> CheckpointError:
        return CheckpointError(f"{source}: {key} {why} (got {config.get(key)!r}); re-download "
                               "the VQ-VAE config")

    def size(value: Any, top: int) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= top

    for key, top in _VQ_SIZES.items():
        if key in config and not size(config[key], top):
            raise bad(key, f"must be an int in [1, {top}]")
    if config.get("vq_embed_dim") is not None and not size(config["vq_embed_dim"], 1 << 12):
        raise bad("vq_embed_dim", "must be null or an int in [1, 4096]")
    channels = config.get("block_out_channels")
    if not isinstance(channels, list) or not 0 < len(channels) <= 8 or \
            not all(size(c, 1 << 13) for c in channels):
        raise bad("block_out_channels", "must be a list of 1 to 8 ints in [1, 8192]")
    for key in ("down_block_types", "up_block_types"):
        types = config.get(key)
        if types is not None and (not isinstance(types, list) or len(types) != len(channels)
                                  or not all(isinstance(t, str) for t in types)):
            raise bad(key, f"must be a list of {len(channels)} block names")
    return channels


def shard_files(folder: Path) -> dict[Path, list[str] | None]:
    """Shard path -> parameter names it must hold (None for a single un-indexed file)."""
    index = folder / INDEX_FILE
    if index.is_file():
        weight_map = read_json(index, "the shard index").get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise CheckpointError(f"{index} has no 'weight_map'; re-download it")
        shards: dict[Path, list[str] | None] = {}
        for name, fname in weight_map.items():
            shards.setdefault(folder / fname, []).append(name)  # type: ignore[union-attr]
        for shard in shards:
            if not shard.is_file():
                raise CheckpointError(f"{shard} is listed in {index.name} but missing; {HUB_HINT}")
        return shards
    if (folder / SINGLE_FILE).is_file():
        return {folder / SINGLE_FILE: None}
    pickles = sorted(p.name for p in folder.iterdir() if p.suffix in PICKLE_SUFFIXES)
    if pickles:
        raise CheckpointError(
            f"{folder} holds pickle weights ({', '.join(pickles)}), which are refused because "
            "loading them can run arbitrary code; use the .safetensors files of the release "
            "(or convert them once with safetensors.torch.save_file)")
    loose = sorted(p.name for p in folder.glob("*.safetensors"))
    hint = f" (found {', '.join(loose)} without {INDEX_FILE})" if loose else ""
    raise CheckpointError(f"{folder} has no {INDEX_FILE} or {SINGLE_FILE}{hint}; {HUB_HINT}")


def get_tensor(handle: Any, shard: Path, key: str) -> torch.Tensor:
    try:
        return handle.get_tensor(key)
    except Exception as exc:
        raise CheckpointError(f"{shard}: tensor {key} cannot be read ({exc}); the file is "
                              "truncated or corrupt, re-download it") from None


def open_shard(shard: Path) -> Any:
    from safetensors import safe_open

    try:
        return safe_open(str(shard), framework="pt", device="cpu")
    except Exception as exc:  # safetensors raises its own SafetensorError on bad headers
        raise CheckpointError(f"{shard} is truncated or corrupt ({exc}); re-download this file") from None


def resolve_device(device: str | torch.device) -> torch.device:
    """A usable torch device, or ValueError naming it and the fix (checked before any loading:
    a CPU-only torch would otherwise fail deep inside with "Torch not compiled with CUDA")."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ValueError(f"device {device!r} is not a torch device (use 'cpu', 'cuda', 'cuda:1', "
                         f"'mps', ...): {e}") from None
    try:
        torch.empty(1, device=dev)
    except Exception as e:  # AssertionError / RuntimeError from torch, by backend
        raise ValueError(f"device {str(dev)!r} is not available here ({e}); use device='cpu' or a "
                         f"torch build and machine with that device") from None
    return dev


