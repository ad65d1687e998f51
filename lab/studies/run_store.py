"""The stored runs of ``lab/studies/quality.py``: one compressed ``.npz`` per prompt set.

``<runs>/<set>.npz`` holds, for every strategy (``<s>``), its chunks of prompts in the order of
their first prompt ``lo``:

* ``<s>/lo``, ``<s>/size``, ``<s>/key``, ``<s>/wall_s``: one entry per chunk (the key is the
  run's arguments: a chunk is reused only when they are equal);
* ``<s>/passed`` (bool: the evaluator's verdict), ``<s>/nfe`` (int16), ``<s>/token_forwards``
  (float64): one entry per prompt, the chunks one after the other;
* ``<s>/<lo:05d>/tokens`` (uint16 ``[n, h*w]``): each image's final VQ codes, from which
  ``pipe.decode(tokens, (h, w))`` gives the image again (the chunks converted from the
  per-image archives of commit 3e0f2f1 have none: those runs kept decoded images instead, see
  docs/reports/QUALITY.md);
* ``<s>/<lo:05d>/images`` (uint8 ``[k, S, S, 3]``): the decoded images of the set's first
  ``SAMPLE_N`` prompts only, the columns of the sample sheets.

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
ROWS = {"passed": bool, "nfe": np.int16, "token_forwards": np.float64}
"""Per-prompt fields and their stored types."""
PER_CHUNK = ("tokens", "images")


def set_file(runs: Path, set_name: str) -> Path:
    return runs / f"{set_name}.npz"


def _chunks(arrays: dict[str, np.ndarray], name: str) -> dict[int, dict[str, Any]]:
    """One strategy's stored chunks, by first prompt."""
    p = name + "/"
    if p + "lo" not in arrays:
        return {}
    out, start = {}, 0
    starts, sizes = arrays[p + "lo"].tolist(), arrays[p + "size"].tolist()
    for i, (lo, size) in enumerate(zip(starts, sizes, strict=True)):
        chunk = {f: arrays[p + f][start:start + size] for f in ROWS}
        chunk |= {f: arrays[f"{p}{lo:05d}/{f}"] for f in PER_CHUNK if f"{p}{lo:05d}/{f}" in arrays}
        out[lo] = chunk | {"key": arrays[p + "key"][i].decode(),
                           "wall_s": float(arrays[p + "wall_s"][i])}
        start += size
    return out


def _pack(name: str, chunks: dict[int, dict[str, Any]]) -> dict[str, np.ndarray]:
    p, order = name + "/", sorted(chunks)
    out = {p + "lo": np.array(order, dtype=np.int32),
           p + "size": np.array([len(chunks[lo]["passed"]) for lo in order], dtype=np.int32),
           p + "key": np.array([chunks[lo]["key"].encode() for lo in order]),
           p + "wall_s": np.array([chunks[lo]["wall_s"] for lo in order], dtype=np.float64)}
    out |= {p + f: np.concatenate([np.asarray(chunks[lo][f], dtype=t) for lo in order])
            for f, t in ROWS.items()}
    out |= {f"{p}{lo:05d}/{f}": chunks[lo][f] for lo in order for f in PER_CHUNK
            if chunks[lo].get(f) is not None}
    return out


def _read(path: Path) -> dict[str, np.ndarray]:
    if not path.is_file():
        return {}
    with np.load(path) as z:
        return {f: z[f] for f in z.files}


def load_chunk(path: Path, name: str, lo: int, key: str | None) -> dict[str, Any] | None:
    """The stored fields of one strategy's chunk made with ``key`` (None: whatever its key),
    else None."""
    chunk = _chunks(_read(path), name).get(lo)
    if chunk is None or key is not None and chunk["key"] != key:
        return None
    return {k: v for k, v in chunk.items() if k != "key"}


def save_chunk(path: Path, name: str, lo: int, key: str, run: dict[str, Any]) -> None:
    """Store one chunk's verdicts, NFE, token-forwards, wall time, tokens and the images of
    prompts below SAMPLE_N (module docstring); other chunks stay as they are."""
    arrays = _read(path)
    chunks = _chunks(arrays, name)
    chunks[lo] = {f: run[f] for f in ROWS} | {"key": key, "wall_s": float(run["wall_s"]),
                                              "tokens": None, "images": None}
    if run.get("tokens") is not None:
        chunks[lo]["tokens"] = np.asarray(run["tokens"], dtype=np.uint16)
    if lo < SAMPLE_N:
        chunks[lo]["images"] = np.asarray(run["images"][:SAMPLE_N - lo], dtype=np.uint8)
    arrays = {f: v for f, v in arrays.items() if not f.startswith(name + "/")} | _pack(name, chunks)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".partial.npz")
    np.savez_compressed(tmp, **arrays)
    os.replace(tmp, path)


def chunk_starts(path: Path, name: str) -> list[int]:
    """The first prompt of each stored chunk of one strategy, in order."""
    return sorted(_chunks(_read(path), name))


def drop_chunk(path: Path, name: str, lo: int) -> None:
    """Remove one strategy's chunk (what a run cut off before that chunk leaves behind)."""
    arrays = _read(path)
    chunks = _chunks(arrays, name)
    chunks.pop(lo)
    arrays = {f: v for f, v in arrays.items() if not f.startswith(name + "/")}
    if chunks:
        arrays |= _pack(name, chunks)
    tmp = path.with_name(path.stem + ".partial.npz")
    np.savez_compressed(tmp, **arrays)
    os.replace(tmp, path)
