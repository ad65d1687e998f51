"""The stored runs of ``benchmarks/quality.py``: one compressed ``.npz`` per prompt set.

``<runs>/<set>.npz`` holds, for every strategy and chunk of prompts (``lo`` = the chunk's first
prompt), arrays named ``<strategy>/<lo:05d>/<field>``:

* ``key``: the run's arguments (a chunk is reused only when they are equal);
* ``passed`` (bool): the evaluator's verdict per prompt; ``nfe`` (int16) and
  ``token_forwards`` (float64) per prompt; ``wall_s``;
* ``tokens`` (uint16 ``[n, h*w]``): each image's final VQ codes, from which
  ``pipe.decode(tokens, (h, w))`` gives the image again (the chunks converted from the
  per-image archives of commit 3e0f2f1 have none: those runs kept decoded images instead, see
  docs/reports/QUALITY.md);
* ``images`` (uint8 ``[k, S, S, 3]``): the decoded images of the set's first ``SAMPLE_N``
  prompts only, the columns of the sample sheets.

A chunk is added by rewriting the file under a temporary name and renaming it, so a reader (or a
cut-off run) sees every finished chunk or the previous file, never half of one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

SAMPLE_N = 7
"""Images kept per strategy: the sample sheets' columns (the first prompt of each group)."""


def set_file(runs: Path, set_name: str) -> Path:
    return runs / f"{set_name}.npz"


def _prefix(name: str, lo: int) -> str:
    return f"{name}/{lo:05d}/"


def load_chunk(path: Path, name: str, lo: int, key: str | None) -> dict[str, Any] | None:
    """The stored fields of one strategy's chunk made with ``key`` (None: whatever its key),
    else None."""
    if not path.is_file():
        return None
    p = _prefix(name, lo)
    with np.load(path) as z:
        if p + "key" not in z.files or key is not None and str(z[p + "key"]) != key:
            return None
        out = {f.removeprefix(p): z[f] for f in z.files if f.startswith(p) and f != p + "key"}
    out["wall_s"] = float(out["wall_s"])
    return out


def save_chunk(path: Path, name: str, lo: int, key: str, run: dict[str, Any]) -> None:
    """Store one chunk's ``passed``, ``nfe``, ``token_forwards``, ``wall_s``, ``tokens`` and the
    images of prompts below SAMPLE_N (module docstring); other chunks stay as they are."""
    p = _prefix(name, lo)
    arrays: dict[str, np.ndarray] = {}
    if path.is_file():
        with np.load(path) as z:
            arrays = {f: z[f] for f in z.files if not f.startswith(p)}
    arrays[p + "key"] = np.array(key)
    arrays[p + "passed"] = np.asarray(run["passed"], dtype=bool)
    arrays[p + "nfe"] = np.asarray(run["nfe"], dtype=np.int16)
    arrays[p + "token_forwards"] = np.asarray(run["token_forwards"], dtype=np.float64)
    arrays[p + "wall_s"] = np.float64(run["wall_s"])
    if run.get("tokens") is not None:
        arrays[p + "tokens"] = np.asarray(run["tokens"], dtype=np.uint16)
    if lo < SAMPLE_N:
        arrays[p + "images"] = np.asarray(run["images"][:SAMPLE_N - lo], dtype=np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".partial.npz")
    np.savez_compressed(tmp, **arrays)
    os.replace(tmp, path)
