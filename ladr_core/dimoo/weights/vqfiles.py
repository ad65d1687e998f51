"""Which files of ``vqvae/`` hold the VQ-VAE's weights, and reading them.

As diffusers' ``VQModel.from_pretrained(checkpoint, subfolder="vqvae")`` in the official
scripts: ``diffusion_pytorch_model.safetensors``, its sharded form (with its
``.safetensors.index.json``) and the ``fp16`` variants; the same names with the stem ``model``
too. Pickle weights (``diffusion_pytorch_model.bin``) are refused with the command that
converts them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import torch

from .files import HUB_HINT, PICKLE_SUFFIXES, CheckpointError, get_tensor, open_shard, read_json

__all__ = ["SHARED_VQ_KEY", "VQWeights", "convert_command", "read_vq_state", "vq_folder",
           "vq_weight_files"]

STEMS = ("diffusion_pytorch_model", "model")
_SINGLE = re.compile(rf"^({'|'.join(STEMS)})(?:\.([\w-]+))?\.safetensors$")
_INDEX = re.compile(rf"^({'|'.join(STEMS)})(?:\.([\w-]+))?\.safetensors\.index(?:\.([\w-]+))?\.json$")
_SHARD = re.compile(rf"^({'|'.join(STEMS)}).*-\d+-of-\d+.*\.safetensors$")
#: variants, best first ("" = none): the weights are read into float32 whatever they store
_PREFER = ("", "fp32", "fp16", "bf16")

SHARED_VQ_KEY = "ladr_shared_vqvae"
"""config.json key of a checkpoint without a ``vqvae/`` of its own: the folder, relative to
the checkpoint's, of the VQ-VAE it shares with a sibling (the shipped nano-mmu reads nano's)."""


def vq_folder(folder: Path) -> Path:
    """The checkpoint's VQ-VAE folder: ``folder/vqvae``, or, when there is none and config.json
    names one (``SHARED_VQ_KEY``), the sibling's it shares; the one place that path is made."""
    own = folder / "vqvae"
    if own.is_dir():
        return own
    try:
        shared = read_json(folder / "config.json", "config.json").get(SHARED_VQ_KEY)
    except CheckpointError:
        return own  # the config's own check reports it
    return (folder / shared).resolve() if isinstance(shared, str) and shared else own


@dataclass
class VQWeights:
    """The files read (shard -> tensor names its index promises, None for a single file),
    how they were found (``form``) and other weight files left unread (``ignored``)."""

    files: dict[Path, list[str] | None]
    form: str
    ignored: list[str]


def _rank(stem: str, variant: str | None) -> tuple[int, int, str]:
    v = variant or ""
    return (STEMS.index(stem), _PREFER.index(v) if v in _PREFER else len(_PREFER), v)


def convert_command(pickle: Path) -> str:
    """The one-line command that rewrites a pickle weight file as safetensors beside it (run
    it only on a file you trust: loading a pickle can run code)."""
    out = pickle.with_suffix(".safetensors")
    return (f'python -c "import torch; from safetensors.torch import save_file; '
            f"save_file(torch.load(r'{pickle}', weights_only=True), r'{out}')\"")


def _indexed(vq_dir: Path, index: Path) -> dict[Path, list[str] | None]:
    weight_map = read_json(index, "the VQ-VAE shard index").get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map or \
            not all(isinstance(v, str) for v in weight_map.values()):
        raise CheckpointError(f"{index} has no 'weight_map' of file names; re-download it")
    files: dict[Path, list[str] | None] = {}
    for name, fname in weight_map.items():
        files.setdefault(vq_dir / fname, []).append(name)  # type: ignore[union-attr]
    for shard in files:
        if not shard.is_file():
            raise CheckpointError(f"{shard} is listed in {index.name} but missing (an "
                                  f"unfinished download); {HUB_HINT}")
    return files


def _missing(vq_dir: Path, names: list[str]) -> CheckpointError:
    pickles = sorted(n for n in names if Path(n).suffix in PICKLE_SUFFIXES)
    if pickles:
        return CheckpointError(
            f"{vq_dir / pickles[0]}: pickle weights (the VQ-VAE's, with no safetensors form "
            "beside them) are refused because loading them can run code; convert them once "
            f"(only if you trust the file): {convert_command(vq_dir / pickles[0])}")
    shards = sorted(n for n in names if _SHARD.match(n))
    if shards:
        return CheckpointError(f"{vq_dir}: VQ-VAE shards ({', '.join(shards[:3])}) without "
                               "their .safetensors.index.json (an unfinished download); "
                               f"{HUB_HINT}")
    return CheckpointError(f"{vq_dir / 'diffusion_pytorch_model.safetensors'} is missing (the "
                           f"VQ-VAE weights; no other safetensors form of them is there); "
                           f"{HUB_HINT}")


def vq_weight_files(vq_dir: Path) -> VQWeights:
    """The VQ-VAE weight files of ``vq_dir`` (module docstring), or CheckpointError naming the
    file and the fix: pickle only, shards without an index, an index naming absent files."""
    names = sorted(p.name for p in vq_dir.iterdir()) if vq_dir.is_dir() else []
    indexes = sorted((m for m in map(_INDEX.match, names) if m),
                     key=lambda m: _rank(m.group(1), m.group(2) or m.group(3)))
    singles = sorted((m for m in map(_SINGLE.match, names) if m),
                     key=lambda m: _rank(m.group(1), m.group(2)))
    found = [m.group(0) for m in indexes + singles]
    if indexes:
        index = vq_dir / indexes[0].group(0)
        files = _indexed(vq_dir, index)
        return VQWeights(files, f"sharded: {index.name} ({len(files)} files)",
                         [n for n in found[1:] if vq_dir / n not in files])
    if singles:
        return VQWeights({vq_dir / found[0]: None}, f"single file {found[0]}", found[1:])
    raise _missing(vq_dir, names)


def read_vq_state(weights: VQWeights) -> dict[str, torch.Tensor]:
    """Every tensor of the files, in float32 on the CPU; CheckpointError naming the file when
    one is corrupt or lacks what its index promises."""
    state: dict[str, torch.Tensor] = {}
    for path, promised in weights.files.items():
        with open_shard(path) as handle:
            keys = list(handle.keys())
            lacking = sorted(set(promised or []) - set(keys))
            if lacking:
                raise CheckpointError(f"{path} lacks {lacking[:3]} promised by its index; "
                                      "re-download it")
            for key in keys:
                state[key] = get_tensor(handle, path, key).float()
    return state
