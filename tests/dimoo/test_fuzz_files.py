"""Property-based fuzz of every file a checkpoint has: each corruption ends in the
pack's CheckpointError with a message naming the file, or loads and runs (where the corruption
cannot be told apart from real weights, e.g. changed quantized bytes).

Bounds, checked on every case:
* time: one load (plus one forward and one decode when it loads) under CASE_SECONDS;
* memory: the load runs under a soft ``RLIMIT_AS`` of the process's current address space plus
  ALLOC_HEADROOM, so a size read from a file and trusted (a lying count, shape or length) ends
  in MemoryError / torch's allocation RuntimeError and fails the case, as does any exception
  that is not CheckpointError.

CI runs ``derandomize=True`` with the ``max_examples`` below (about a minute on two cores);
``LADR_FUZZ_EXAMPLES=N`` sets N random (not derandomized) examples per test for a longer
local run.
"""

from __future__ import annotations

import json
import math
import os
import resource
import shutil
import struct
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from ladr_core import load_dimoo, nano_model_path  # noqa: E402
from ladr_core.dimoo import CheckpointError  # noqa: E402
from ladr_core.dimoo.model.vq import decode_codes  # noqa: E402
from ladr_core.dimoo.weights import gguf_write  # noqa: E402

NANO = Path(nano_model_path())
CASE_SECONDS = 20.0
ALLOC_HEADROOM = 1 << 30  # bytes of address space a load may add
EXAMPLES = int(os.environ.get("LADR_FUZZ_EXAMPLES", "0"))


def _settings(n: int) -> settings:
    # no shrinking: each example is a whole load, and the failing one is printed as drawn
    return settings(max_examples=EXAMPLES or n, deadline=None, derandomize=not EXAMPLES,
                    suppress_health_check=list(HealthCheck), database=None,
                    phases=(Phase.explicit, Phase.generate), print_blob=False)


# ---- the files ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def q8_bytes(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, list[tuple[str, int, int]]]:
    """The nano model as Q8_0 GGUF (gguf_write, as ``ladr_core.dimoo.save`` writes it) and its
    header slots (label, offset, size): magic, version, counts, every key / value / tensor-info
    part."""
    from gguf import GGUFReader

    path = gguf_write.write_gguf(NANO, tmp_path_factory.mktemp("fuzz") / "nano-Q8_0.gguf", "Q8_0")
    reader = GGUFReader(str(path))
    slots = [("magic", 0, 4), ("version", 4, 4), ("n_tensors", 8, 8), ("n_kv", 16, 8)]
    fields = [(k, f) for k, f in reader.fields.items() if not k.startswith("GGUF.")]
    fields += [(f"tensor {t.name}", t.field) for t in reader.tensors]
    for label, field in fields:
        at = field.offset
        for i, part in enumerate(field.parts):
            slots.append((f"{label} part {i}", at, part.nbytes))
            at += part.nbytes
    load_dimoo(path, dtype=torch.float32)  # warm every import before memory is limited
    return path.read_bytes(), slots


def _run(path: Path, name: str) -> None:
    """Load ``path``; CheckpointError naming ``name``, or a model that runs on every id."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as f:
        used = int(f.read().split()[0]) * resource.getpagesize()
    start = time.monotonic()
    resource.setrlimit(resource.RLIMIT_AS, (used + ALLOC_HEADROOM, hard))
    try:
        pipe = load_dimoo(path, dtype=torch.float32)
    except CheckpointError as exc:
        assert name in str(exc), f"the message does not name {name}: {exc}"
        return
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        assert time.monotonic() - start < CASE_SECONDS
    config, k = pipe.transformer.config, pipe.vq.config.num_vq_embeddings
    logits = pipe.transformer(torch.arange(config.n_embeddings)[None])
    assert torch.isfinite(logits).all(), "a loaded model must give finite logits"
    decode_codes(pipe.vq, torch.arange(k)[None], (1, k))
    assert time.monotonic() - start < CASE_SECONDS


def _with_folder(edit: Callable[[Path], str]) -> None:
    """A copy of the nano folder, ``edit(folder)`` -> the file it corrupted, loaded."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(shutil.copytree(NANO, Path(tmp) / "nano"))
        name = edit(folder)
        _run(folder, name)


# ---- GGUF --------------------------------------------------------------------------------------
INTS = st.sampled_from([0, 1, 2, 3, 255, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**63 - 1, 2**64 - 1])


def _int_bytes(value: int, size: int) -> bytes:
    return (value % (1 << (8 * size))).to_bytes(size, "little")


@_settings(40)
@given(data=st.data())
def test_gguf_header_fields(q8_bytes, data) -> None:
    raw, slots = q8_bytes
    label, at, size = data.draw(st.sampled_from(slots), label="slot")
    if size in (4, 8) and data.draw(st.booleans(), label="as int"):
        value = data.draw(INTS | st.integers(0, 2**64 - 1), label="value")
        new = _int_bytes(value, size)
    else:
        new = data.draw(st.binary(min_size=size, max_size=size), label="bytes")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bad.gguf"
        path.write_bytes(raw[:at] + new + raw[at + size:])
        _run(path, str(path))


@pytest.mark.parametrize("prefix", ["vq.", "blocks."])
def test_gguf_unknown_tensor_type(q8_bytes, prefix: str) -> None:
    """A GGML type gguf knows but this loader does not read (Q4_0, id 2: a case an earlier random
    run found in the VQ-VAE part, which then ended in a bare KeyError): CheckpointError naming
    the file."""
    raw, slots = q8_bytes
    # a tensor info's parts: name length, name, n_dims, dims, type, offset (gguf's reader)
    label, at, size = next(s for s in slots if s[0].startswith(f"tensor {prefix}")
                           and s[0].endswith(" part 4"))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bad.gguf"
        path.write_bytes(raw[:at] + _int_bytes(2, size) + raw[at + size:])
        with pytest.raises(CheckpointError) as err:
            load_dimoo(path, dtype=torch.float32)
        assert str(path) in str(err.value)


@_settings(25)
@given(data=st.data())
def test_gguf_random_header_bytes_and_truncation(q8_bytes, data) -> None:
    raw, slots = q8_bytes
    end = max(at + size for _, at, size in slots)
    out = bytearray(raw)
    for pos in data.draw(st.lists(st.integers(0, end - 1), min_size=1, max_size=6), label="at"):
        out[pos] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans(), label="truncate"):
        out = out[:data.draw(st.integers(0, len(out) - 1), label="length")]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bad.gguf"
        path.write_bytes(bytes(out))
        _run(path, str(path))


@_settings(4)
@given(data=st.data())
def test_gguf_tensor_data(q8_bytes, data) -> None:
    """GGUF has no checksum: changed data either loads and runs or is refused (scales and
    float weights are checked), never a bare error at run time."""
    raw, slots = q8_bytes
    end = max(at + size for _, at, size in slots)
    out = bytearray(raw)
    for pos in data.draw(st.lists(st.integers(end, len(raw) - 1), min_size=1, max_size=8)):
        out[pos] = data.draw(st.integers(0, 255))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bad.gguf"
        path.write_bytes(bytes(out))
        _run(path, str(path))


# ---- config.json and the VQ config -------------------------------------------------------------
BAD_VALUES = st.sampled_from([1.5, 4.0, -1, 0, 10**30, 2**63, math.nan, math.inf, -math.inf,
                              "x", "", None, [], {}, True, False, [1, 2]])


def _edit_json(path: Path, key: str, value: object) -> None:
    data = json.loads(path.read_text())
    data[key] = value
    path.write_text(json.dumps(data))


@_settings(25)
@given(key=st.sampled_from(sorted(json.loads((NANO / "config.json").read_text()))),
       value=BAD_VALUES)
def test_config_fields(key: str, value: object) -> None:
    def edit(folder: Path) -> str:
        _edit_json(folder / "config.json", key, value)
        return "config.json"  # an id that contradicts the tokenizer is named in both files
    _with_folder(edit)


@_settings(15)
@given(key=st.sampled_from(sorted(json.loads((NANO / "vqvae" / "config.json").read_text()))),
       value=BAD_VALUES | st.integers(2**16, 2**40))
def test_vq_config_fields(key: str, value: object) -> None:
    def edit(folder: Path) -> str:
        _edit_json(folder / "vqvae" / "config.json", key, value)
        return str(folder / "vqvae")
    _with_folder(edit)


# ---- safetensors, tokenizer, raw bytes of any file ---------------------------------------------
SAFETENSORS = ["model.safetensors", "vqvae/diffusion_pytorch_model.safetensors",
               "vqvae/preview_table.safetensors"]


def _header(path: Path) -> tuple[int, dict]:
    blob = path.read_bytes()
    n = struct.unpack("<Q", blob[:8])[0]
    return n, json.loads(blob[8:8 + n])


@_settings(40)
@given(rel=st.sampled_from(SAFETENSORS), data=st.data())
def test_safetensors_headers(rel: str, data) -> None:
    def edit(folder: Path) -> str:
        path = folder / rel
        blob = path.read_bytes()
        n, header = _header(path)
        how = data.draw(st.sampled_from(["length", "json", "dtype", "shape", "offsets"]))
        if how == "length":
            blob = struct.pack("<Q", data.draw(INTS | st.integers(0, 2 * n))) + blob[8:]
        elif how == "json":
            at = data.draw(st.integers(8, 8 + n - 1))
            blob = blob[:at] + bytes([data.draw(st.integers(0, 255))]) + blob[at + 1:]
        else:
            name = data.draw(st.sampled_from(sorted(k for k in header if k != "__metadata__")))
            entry = header[name]
            field = {"dtype": "dtype", "shape": "shape", "offsets": "data_offsets"}[how]
            entry[field] = data.draw(st.sampled_from(
                ["F64", "I64", "U8", "BOOL", "F8_E4M3", "XX"]) if how == "dtype" else
                st.lists(st.sampled_from([0, 1, 3, 2**31, 2**40, 2**62]), max_size=5))
            text = json.dumps(header).encode()
            blob = struct.pack("<Q", len(text)) + text + blob[8 + n:]
        path.write_bytes(blob)
        return str(path.parent if rel.startswith("vqvae/diffusion") else path)
    _with_folder(edit)


def test_renamed_tensor_names_the_weights_file() -> None:
    """A tensor name changed in the safetensors header (one JSON byte: a case a longer random
    run found, whose message named only the folder): the message names the file."""
    def edit(folder: Path) -> str:
        path = folder / "model.safetensors"
        blob = path.read_bytes()
        _, header = _header(path)
        name = next(k for k in header if k.startswith("model.transformer."))
        at = blob.index(name.encode(), 8) + len("model.transformer")
        path.write_bytes(blob[:at] + b":" + blob[at + 1:])
        return str(path)
    _with_folder(edit)


@_settings(25)
@given(rel=st.sampled_from(["config.json", "tokenizer.json", "tokenizer_config.json",
                            "vqvae/config.json", *SAFETENSORS]), data=st.data())
def test_any_file_bytes(rel: str, data) -> None:
    """Random bytes changed, or the file truncated or replaced by JSON of another shape."""
    def edit(folder: Path) -> str:
        path = folder / rel
        blob = bytearray(path.read_bytes())
        how = data.draw(st.sampled_from(["bytes", "truncate", "other json"]))
        if how == "bytes":
            for pos in data.draw(st.lists(st.integers(0, len(blob) - 1), min_size=1, max_size=8)):
                blob[pos] = data.draw(st.integers(0, 255))
        elif how == "truncate":
            blob = blob[:data.draw(st.integers(0, len(blob) - 1))]
        else:
            blob = bytearray(json.dumps(data.draw(BAD_VALUES | st.just({"a": 1}))).encode())
        path.write_bytes(bytes(blob))
        vq_weights = rel == "vqvae/diffusion_pytorch_model.safetensors"
        return str(path.parent if vq_weights or rel == "vqvae/config.json" else path)
    _with_folder(edit)


# ---- the loader node ---------------------------------------------------------------------------
@_settings(10)
@given(data=st.data())
def test_loader_node_gguf(q8_bytes, data) -> None:
    """The node's path (nodes/loader.py load_model: model folder lookup, cache key, host
    operations): a corrupted GGUF ends in CheckpointError naming it and is not cached."""
    from nodes import loader

    raw, slots = q8_bytes
    label, at, size = data.draw(st.sampled_from(slots), label="slot")
    new = data.draw(st.binary(min_size=size, max_size=size), label="bytes")
    old_dir = os.environ.get("LADR_MODELS_DIR")
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "bad.gguf").write_bytes(raw[:at] + new + raw[at + size:])
        os.environ["LADR_MODELS_DIR"] = tmp
        loader._CACHE.clear()
        try:
            loader.load_model("bad.gguf", "fp32")
        except CheckpointError as exc:
            assert "bad.gguf" in str(exc)
            assert loader._CACHE == {}
        finally:
            loader._CACHE.clear()
            if old_dir is None:
                os.environ.pop("LADR_MODELS_DIR", None)
            else:
                os.environ["LADR_MODELS_DIR"] = old_dir
