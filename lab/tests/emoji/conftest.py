"""A private emoji cache per test (LADR_EMOJI_CACHE), so no test reads or writes the real one."""

from __future__ import annotations

import numpy as np
import pytest

from lab.emoji.bank import FULL, SPRITE, STYLES, Bank
from lab.emoji.vocab import VOCAB


@pytest.fixture
def emoji_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LADR_EMOJI_CACHE", str(tmp_path / "emoji-cache"))
    return tmp_path / "emoji-cache"


def _disc(size: int, rgb: tuple[int, int, int]) -> np.ndarray:
    yy, xx = np.mgrid[0:size, 0:size] + 0.5
    inside = (yy - size / 2) ** 2 + (xx - size / 2) ** 2 <= (size / 2) ** 2
    out = np.zeros((size, size, 4), dtype=np.uint8)
    out[inside] = (*rgb, 255)
    return out


@pytest.fixture
def disc_bank() -> Bank:
    """An in-memory bank: emoji i is an opaque disc of a colour of its own, in every style."""
    from fake_packages import colour

    full = np.stack([_disc(FULL, colour(i)) for i in range(len(VOCAB))])
    sprites = np.stack([_disc(SPRITE, colour(i)) for i in range(len(VOCAB))])
    return Bank(STYLES, np.stack([full] * len(STYLES)), np.stack([sprites] * len(STYLES)))
