"""Files shipped with the package: the trained DiMOO-nano checkpoint, its sibling that also
answers questions about its scenes (DiMOO-nano-mmu, lab/nano/train_understanding.py), and
DiMOO-emoji, drawn emoji on a 48 px canvas (written by ``python -m lab.emoji.ship``), each in
the official layout, loading with ``load_dimoo`` like the real model.

Keys of ours in config.json, all optional (a bad value is a ``CheckpointError``):
``default_image_size`` (else 1024), ``default_cfg`` (else the official 4.0), ``ladr_can_edit``
and ``ladr_can_understand`` (else true; a task a checkpoint cannot do is refused on ``model``).
Nano writes 48, 0.75, false, false. Nano-mmu stores no VQ of its own: ``ladr_shared_vqvae``
names nano's ``vqvae/`` (found through ``weights/vqfiles.vq_folder``; a saved copy gets its
own); its understanding words are appended to the text vocabulary before the image codes.
"""

from __future__ import annotations

import json
from pathlib import Path

NANO_DIRNAME = "dimoo_nano"
NANO_MMU_DIRNAME = "dimoo_nano_mmu"
EMOJI_DIRNAME = "dimoo_emoji"


def nano_model_path() -> Path:
    """Folder of the shipped DiMOO-nano checkpoint, in the official Lumina-DiMOO layout."""
    return Path(__file__).resolve().parent / NANO_DIRNAME


def nano_mmu_model_path() -> Path:
    """Folder of DiMOO-nano-mmu: the shipped nano's sibling that draws the same scenes and
    also describes them and answers questions about colour, shape, count and position."""
    return Path(__file__).resolve().parent / NANO_MMU_DIRNAME


def emoji_model_path() -> Path:
    """Folder of DiMOO-emoji: a model of the same size trained on Noto Emoji and Twemoji
    pictures (24 emoji, 48 px; draws only), with a learned VQ; its weights' license and
    attributions are in the folder's LICENSE.md."""
    return Path(__file__).resolve().parent / EMOJI_DIRNAME


def _default_cfg(folder: Path) -> float | None:
    try:
        value = json.loads((folder / "config.json").read_text()).get("default_cfg")
    except (OSError, ValueError, AttributeError):
        return None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def nano_default_cfg() -> float | None:
    """The guidance scale the shipped nano model was tuned for (config.json ``default_cfg``),
    or None when the checkpoint or the key is missing (the pipeline then validates and uses
    4.0); for labels and example workflows, which must not fail on a damaged checkout."""
    return _default_cfg(nano_model_path())


def emoji_default_cfg() -> float | None:
    """The guidance scale DiMOO-emoji was tuned for, as ``nano_default_cfg``."""
    return _default_cfg(emoji_model_path())


def nano_vq_factor() -> int | None:
    """Pixels per token side of the shipped nano (``vq_factor_of``), or None when its config
    is missing or damaged: for messages and labels given before a model is loaded."""
    return vq_factor_of(nano_model_path())


def vq_factor_of(folder: str | Path) -> int | None:
    """Pixels per token side of the checkpoint folder ``folder`` (official layout): its
    VQ-VAE's ``2 ** (len(block_out_channels) - 1)``, as the loader computes it, read from
    ``vqvae/config.json`` alone (no weight is read); None when that config is missing or does
    not say. Lumina-DiMOO 8B: 16; the built-in models: 4."""
    try:
        raw = json.loads((Path(folder) / "vqvae" / "config.json").read_text())
    except (OSError, ValueError):
        return None
    channels = raw.get("block_out_channels") if isinstance(raw, dict) else None
    return 2 ** (len(channels) - 1) if isinstance(channels, list) and 0 < len(channels) <= 8 \
        else None
