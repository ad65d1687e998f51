"""Files shipped with the package (the trained DiMOO-nano checkpoint)."""

from __future__ import annotations

from pathlib import Path

NANO_DIRNAME = "dimoo_nano"


def nano_model_path() -> Path:
    """Folder of the shipped DiMOO-nano checkpoint, in the official Lumina-DiMOO layout."""
    return Path(__file__).resolve().parent / NANO_DIRNAME
