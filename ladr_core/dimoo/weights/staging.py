"""Write converted models so that a half-written result is never taken for a valid one.

* ``staged_folder(out)``: files go to a hidden sibling ``.<name>.incomplete-<pid>`` holding
  ``INCOMPLETE_MARKER`` until the end, then renamed to ``out`` (one ``os.replace``), or deleted
  on an exception; a killed process leaves the hidden sibling, which the loader refuses
  (``check_complete``) and the loader node does not list.
* ``staged_file(out)``: the same for one file (a GGUF).
* ``write_safetensors``: a safetensors file written tensor by tensor from a producer (header
  first), never held in memory.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import torch

__all__ = ["INCOMPLETE_MARKER", "check_target", "staged_folder", "staged_file", "check_complete",
           "write_safetensors", "SAFETENSORS_DTYPES", "nbytes", "row_chunks", "CHUNK"]

CHUNK = 1 << 24  # weights converted at a time (bounds the float32 temporaries)
INCOMPLETE_MARKER = "LADR_CONVERSION_INCOMPLETE"
SAFETENSORS_DTYPES = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16",
                      torch.bfloat16: "BF16", torch.int64: "I64", torch.int32: "I32",
                      torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8", torch.bool: "BOOL"}
for _attr, _name in (("float8_e4m3fn", "F8_E4M3"), ("float8_e5m2", "F8_E5M2")):
    if hasattr(torch, _attr):
        SAFETENSORS_DTYPES[getattr(torch, _attr)] = _name


def check_target(out: Path) -> None:
    """ValueError unless ``out`` is absent or an empty folder."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"{out} exists and is not an empty folder; pick a new folder")


@contextmanager
def staged_folder(out: str | Path) -> Iterator[Path]:
    """Yield a hidden staging folder; on success it becomes ``out`` (module docstring)."""
    out = Path(out).expanduser()
    check_target(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.incomplete-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    (tmp / INCOMPLETE_MARKER).write_text(
        f"A conversion to {out.name} was writing this folder and did not finish. Delete it and "
        "run the converter again.\n", encoding="utf-8")
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    (tmp / INCOMPLETE_MARKER).unlink()
    if out.exists():
        out.rmdir()  # empty (checked above)
    os.replace(tmp, out)


@contextmanager
def staged_file(out: str | Path) -> Iterator[Path]:
    """Yield a hidden staging path next to ``out``; renamed to ``out`` on success."""
    out = Path(out).expanduser()
    if out.exists():
        raise ValueError(f"{out} exists; pick a new file name")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.incomplete-{os.getpid()}"
    try:
        yield tmp
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, out)


def check_complete(folder: Path) -> str | None:
    """The reason ``folder`` must not be loaded (an unfinished conversion), else None."""
    if (folder / INCOMPLETE_MARKER).exists():
        return (f"{folder} is a conversion that did not finish (it still holds "
                f"{INCOMPLETE_MARKER}); delete the folder and run the converter again")
    return None


def nbytes(shape: Sequence[int], dtype: torch.dtype) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n * dtype.itemsize


def write_safetensors(path: Path, entries: Sequence[tuple[str, torch.dtype, Sequence[int]]],
                      produce: Callable[[str], torch.Tensor],
                      metadata: dict[str, str] | None = None) -> int:
    """Write ``entries`` (name, dtype, shape) in order, asking ``produce(name)`` for each just
    before its bytes (ValueError when it differs from its entry); returns the data bytes."""
    header: dict[str, object] = {"__metadata__": dict(metadata or {})}
    offset = 0
    for name, dtype, shape in entries:
        size = nbytes(shape, dtype)
        header[name] = {"dtype": SAFETENSORS_DTYPES[dtype], "shape": [int(s) for s in shape],
                        "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for name, dtype, shape in entries:
            tensor = produce(name)
            if tensor.dtype != dtype or list(tensor.shape) != [int(s) for s in shape]:
                raise ValueError(f"{name}: produced {tensor.dtype} {tuple(tensor.shape)}, "
                                 f"planned {dtype} {tuple(shape)}")
            data = tensor.detach().to("cpu").contiguous().reshape(-1).view(torch.uint8)
            f.write(memoryview(data.numpy()))
    return offset


def row_chunks(shape: torch.Size | list[int], weights: int | None = None) -> list[slice]:
    """Slices of about ``weights`` (default CHUNK) elements over the rows of ``shape``."""
    step = max(1, (weights or CHUNK) // max(1, int(shape[1]) if len(shape) > 1 else 1))
    return [slice(i, min(i + step, int(shape[0]))) for i in range(0, int(shape[0]), step)]
