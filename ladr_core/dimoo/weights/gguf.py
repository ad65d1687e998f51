"""Lumina-DiMOO stored as one GGUF file: read, check, and run with per-layer dequantization.

File layout (written by gguf_write.py; read with the `gguf` package): `general.architecture`
= `lumina-dimoo` with `lumina-dimoo.config_json`, `.tokenizer_json`, `.vqvae_config_json` and
`.recipe` (Q8_0, Q5_K_M, Q4_K_M); the transformer tensors under the official names without
`model.transformer.` in the GGML types of ggml.py (a block linear whose rows are not whole
256-weight super-blocks, as nano's 128-wide rows, stored as `[numel / 256, 256]`); the VQ-VAE's
tensors under `vq.` in their float dtype.

Every tensor name, type and shape is checked against config.json before any layer is built.
Linear and embedding layers keep their GGML bytes (uint8 `[rows, row_bytes]`) and dequantize
at use: a linear its whole matrix (for a 16-bit dtype `DEQUANT_ROWS` rows at a time), the
embedding the rows it looks up, the output head `HEAD_CHUNK` rows at a time
(model/transformer.py). The classes derive from the host's `operations` (ComfyUI:
`comfy.ops.manual_cast`), so ModelPatcher can leave any of them in RAM; a weight left on
another device is moved as bytes at use, never cast.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..model.config import LLaDAConfig
from ..model.transformer import LLaDAModel
from . import ggml
from .files import (
    CheckpointError,
    LoadedCheckpoint,
    check_vq_config,
    parse_config,
)
from .formats import parameter_shapes
from .tokenizer import check_tokenizer

__all__ = ["ARCH", "KEYS", "gguf_ops", "load_gguf_checkpoint", "read_gguf", "GGUFFile",
           "TRANSFORMER_PREFIX"]

ARCH = "lumina-dimoo"
KEYS = {"config": f"{ARCH}.config_json", "tokenizer": f"{ARCH}.tokenizer_json",
        "vqvae": f"{ARCH}.vqvae_config_json", "recipe": f"{ARCH}.recipe"}
TRANSFORMER_PREFIX = "model.transformer."
CONVERT_HINT = ("convert the official folder again: python -m ladr_core.dimoo.save SRC "
                "OUT.gguf --weight-dtype Q4_K_M (or Q8_0, Q5_K_M)")

DEQUANT_ROWS = 1024
"""Rows of a matrix decoded at once when the compute dtype is not float32: a 12,288 x 4,096
layer of the 8B model goes through 48 MiB of float32 per chunk instead of 192 MiB beside its
96 MiB bf16 copy (a float32 computation keeps the decoded values: no copy, nothing chunked)."""


class GGUFLayer:
    """Mixin: GGML bytes in ``weight`` and their type in ``ggml_type`` (a name of ggml.py)."""

    ggml_type: str = "F32"
    compute_dtype: torch.dtype = torch.float32

    def _load_from_state_dict(self, state_dict: dict, prefix: str, local_metadata: dict,
                              strict: bool, missing_keys: list, unexpected_keys: list,
                              error_msgs: list) -> None:
        raw = state_dict.get(prefix + "weight")
        kind = state_dict.get(prefix + "ggml_type")
        if raw is None or kind is None:
            missing_keys.append(prefix + "weight")
            return
        self.ggml_type = ggml.GGML_TYPES[int(kind)][0]
        self.weight = nn.Parameter(raw, requires_grad=False)  # type: ignore[assignment]
        for key in state_dict:
            rest = key[len(prefix):]
            if key.startswith(prefix) and "." not in rest and rest not in ("weight", "ggml_type"):
                unexpected_keys.append(key)

    def dequantized(self, rows: Any, device: torch.device, dtype: torch.dtype, n: int
                    ) -> torch.Tensor:
        """Rows ``rows`` (slice / index tensor / None = all) as floats ``[r, n]``."""
        raw = self.weight
        if raw.shape[0] != self._rows():  # block-flattened storage: decode whole, then pick
            full = ggml.dequantize(raw.to(device), self.ggml_type, ggml.QK, dtype)
            full = full.reshape(self._rows(), n)
            return full if rows is None else full[rows]
        if rows is None and raw.shape[0] > DEQUANT_ROWS and dtype != torch.float32:
            return self._into(raw, device, dtype, n)
        part = raw if rows is None else raw[rows]
        return ggml.dequantize(part.to(device, non_blocking=True), self.ggml_type, n, dtype)

    def _into(self, raw: torch.Tensor, device: torch.device, dtype: torch.dtype, n: int
              ) -> torch.Tensor:
        """The whole matrix in ``dtype``, DEQUANT_ROWS rows decoded at a time into it: the
        float32 values a block format is decoded through (ggml.py) are one chunk's, not the
        matrix's, and the values are the same."""
        out = torch.empty(raw.shape[0], n, device=device, dtype=dtype)
        for a in range(0, raw.shape[0], DEQUANT_ROWS):
            part = raw[a:a + DEQUANT_ROWS].to(device, non_blocking=True)
            out[a:a + DEQUANT_ROWS] = ggml.dequantize(part, self.ggml_type, n, dtype)
        return out

    def _rows(self) -> int:
        raise NotImplementedError


_CLASSES: dict[tuple[type, type, torch.dtype], type] = {}


def _linear_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    w = self.dequantized(None, x.device, x.dtype, self.in_features)
    bias = self.bias.to(x.device, x.dtype) if self.bias is not None else None
    return F.linear(x, w, bias)


def _embedding_forward(self: Any, ids: torch.Tensor) -> torch.Tensor:
    rows = self.dequantized(ids.reshape(-1).to(self.weight.device), ids.device,
                            self.compute_dtype, self.embedding_dim)
    return rows.view(*ids.shape, self.embedding_dim)


# kind -> (forward, attribute: width of a row, attribute: number of rows, what is dequantized)
_KINDS = {nn.Linear: (_linear_forward, "in_features", "out_features", "weights dequantized at use"),
          nn.Embedding: (_embedding_forward, "embedding_dim", "num_embeddings", "rows dequantized at lookup")}


def _layer_class(base: type, kind: type, dtype: torch.dtype) -> type:
    """``base`` (the host's Linear or Embedding) holding GGML bytes: one class per (base,
    kind, dtype), made once."""
    key = (base, kind, dtype)
    if key not in _CLASSES:
        forward, width, rows, what = _KINDS[kind]

        def weight_rows(self: Any, rows_: Any, device: torch.device, dtype_: torch.dtype
                        ) -> torch.Tensor:
            return self.dequantized(rows_, device, dtype_, getattr(self, width))

        _CLASSES[key] = type(f"GGUF{base.__name__}", (GGUFLayer, base), {
            "forward": forward, "weight_rows": weight_rows, "compute_dtype": dtype,
            "_rows": lambda self: getattr(self, rows),
            "__doc__": f"{base.__name__} with GGML {what} (gguf.py)."})
    return _CLASSES[key]


def gguf_ops(operations: Any, dtype: torch.dtype) -> Any:
    """Namespace whose Linear / Embedding hold GGML bytes, derived from ``operations``
    (None = ``torch.nn``); ``dtype``: what the embedding returns."""
    base = nn if operations is None else operations
    return type("GGUFOps", (), {"Linear": _layer_class(base.Linear, nn.Linear, dtype),
                                "Embedding": _layer_class(base.Embedding, nn.Embedding, dtype)})


class GGUFFile:
    """An opened GGUF file: metadata strings and tensors by name (``gguf.GGUFReader``)."""

    def __init__(self, path: Path) -> None:
        try:
            from gguf import GGUFReader
        except ImportError:
            raise RuntimeError(f"{path}: reading GGUF files needs the 'gguf' package; "
                               "pip install gguf (it is in requirements.txt)") from None
        if not path.is_file():
            raise CheckpointError(f"{path} does not exist; put the .gguf file under "
                                  f"models/lumina_dimoo/ or {CONVERT_HINT}")
        try:
            self.reader = GGUFReader(str(path))
        except Exception as exc:  # bad magic, truncated header, unknown version ...
            raise CheckpointError(f"{path} is not a readable GGUF file ({exc}); it is truncated "
                                  f"or corrupt: download it again or {CONVERT_HINT}") from None
        self.path = path
        self.tensors = {t.name: t for t in self.reader.tensors}
        end = max((t.data_offset + t.n_bytes for t in self.reader.tensors), default=0)
        if path.stat().st_size < end:
            raise CheckpointError(f"{path} is truncated ({path.stat().st_size} bytes, its "
                                  f"tensors end at {end}); download it again or {CONVERT_HINT}")

    def string(self, key: str) -> str | None:
        """Metadata string ``key`` (None if absent); CheckpointError naming the file and the key
        when it is another type or not UTF-8 (a corrupted header)."""
        from gguf import GGUFValueType

        field = self.reader.fields.get(key)
        if field is None:
            return None
        try:
            if list(field.types) != [GGUFValueType.STRING] or len(field.data) != 1:
                raise ValueError(f"it is {[t.name for t in field.types]}, not one string")
            return bytes(field.parts[field.data[0]]).decode("utf-8")
        except (ValueError, IndexError) as exc:  # UnicodeDecodeError is a ValueError
            raise CheckpointError(f"{self.path}: metadata {key} is not a UTF-8 string ({exc}); "
                                  f"the file is corrupt, download it again or {CONVERT_HINT}"
                                  ) from None

    def json(self, key: str) -> dict[str, Any]:
        text = self.string(key)
        try:
            data = json.loads(text) if text is not None else None
        except json.JSONDecodeError:
            data = None
        if not isinstance(data, dict):
            raise CheckpointError(f"{self.path}: metadata {key} is missing or not a JSON object; "
                                  f"the file is incomplete, {CONVERT_HINT}")
        return data

    def shape(self, name: str) -> list[int]:
        """Shape of tensor ``name`` in torch order (outermost first)."""
        return [int(d) for d in reversed(self.tensors[name].shape.tolist())]

    def kind(self, name: str) -> str:
        """The GGML type name of tensor ``name``; CheckpointError for a type this loader does
        not read (a corrupt or foreign file)."""
        kind = ggml.GGML_TYPES.get(int(self.tensors[name].tensor_type))
        if kind is None:
            raise CheckpointError(f"{self.path}: tensor {name} has GGML type "
                                  f"{int(self.tensors[name].tensor_type)}, which this loader "
                                  f"does not read; {CONVERT_HINT}")
        return kind[0]

    def raw(self, name: str) -> torch.Tensor:
        """The tensor's bytes as uint8 ``[rows, row_bytes]`` (1-D tensors: one row)."""
        data = np.ascontiguousarray(self.tensors[name].data).reshape(-1).view(np.uint8)
        shape = self.shape(name)
        return torch.from_numpy(data.copy()).reshape(shape[0] if len(shape) > 1 else 1, -1)

    def values(self, name: str) -> torch.Tensor:
        """A float tensor (F32 / F16 / BF16) as stored, in its shape."""
        view = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}[self.kind(name)]
        return self.raw(name).reshape(-1).view(view).reshape(self.shape(name))


def read_gguf(path: str | Path) -> GGUFFile:
    """Open and identify a Lumina-DiMOO GGUF file; CheckpointError for another architecture."""
    f = GGUFFile(Path(path).expanduser())
    arch = f.string("general.architecture")
    if arch != ARCH:
        raise CheckpointError(
            f"{f.path} holds a {arch!r} model (general.architecture), not Lumina-DiMOO "
            f"({ARCH!r}); use a GGUF made by this pack: {CONVERT_HINT}")
    return f


def _check_tensor(f: GGUFFile, name: str, want: list[int]) -> str | None:
    """Why tensor ``name`` cannot stand for a weight of shape ``want``, else None."""
    t = f.tensors[name]
    kind = ggml.GGML_TYPES.get(int(t.tensor_type))
    if kind is None:
        return (f"{name} has GGML type {t.tensor_type.name}, which this loader does not read "
                f"(it reads {', '.join(n for n, _, _ in ggml.GGML_TYPES.values())})")
    if len(want) == 1 and kind[0] not in ("F32", "F16", "BF16"):
        return f"{name} is {kind[0]}, but norm weights are stored in float"
    shape = [int(d) for d in reversed(t.shape.tolist())]
    flat = len(want) == 2 and shape == [want[0] * want[1] // ggml.QK, ggml.QK] and \
        want[1] % ggml.QK != 0 and kind[0] in ("Q4_K", "Q5_K", "Q6_K") and \
        name.startswith("blocks.")
    if shape != want and not flat:
        return f"{name} has shape {tuple(shape)} but config.json implies {tuple(want)}"
    return None


#: byte offsets of the fp16 scales inside one block of each type (ggml.py layouts)
_SCALE_OFFSETS = {"Q8_0": (0,), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,)}
#: largest |float weight| accepted (norms, VQ-VAE: float16's largest value; real ones are
#: small). GGUF has no checksum, and a flipped exponent byte would overflow the logits later
FLOAT_LIMIT = 65504.0


def _finite(f: GGUFFile, name: str, values: torch.Tensor, limit: float) -> torch.Tensor:
    """``values`` if finite and within ``limit``; else CheckpointError naming the tensor."""
    if not bool(torch.isfinite(values).all()) or float(values.abs().max()) > limit:
        raise CheckpointError(f"{f.path}: tensor {name} holds non-finite or out-of-range "
                              f"values (|x| > {limit:g}); the file is corrupt, download it "
                              f"again or {CONVERT_HINT}")
    return values


def _check_scales(f: GGUFFile, name: str, raw: torch.Tensor) -> torch.Tensor:
    """``raw`` if every fp16 block scale of its GGML type is finite (exponent bits not all
    ones); else CheckpointError naming the tensor."""
    kind = f.kind(name)
    offsets = _SCALE_OFFSETS.get(kind, ())
    if offsets:
        blocks = raw.reshape(-1, ggml.block_bytes(kind)[1])
        for at in offsets:
            half = blocks[:, at:at + 2].contiguous().view(torch.int16)
            if bool(((half & 0x7C00) == 0x7C00).any()):
                raise CheckpointError(f"{f.path}: tensor {name} ({kind}) holds non-finite "
                                      f"block scales; the file is corrupt, download it again "
                                      f"or {CONVERT_HINT}")
    elif not bool(torch.isfinite(f.values(name)).all()):
        raise CheckpointError(f"{f.path}: tensor {name} holds non-finite values; the file is "
                              f"corrupt, download it again or {CONVERT_HINT}")
    return raw


def _transformer_state(f: GGUFFile, config: LLaDAConfig, device: torch.device
                       ) -> dict[str, torch.Tensor]:
    expected = {k: list(v) for k, v in parameter_shapes(config).items()}
    names = {TRANSFORMER_PREFIX + k: k for k in f.tensors if not k.startswith("vq.")}
    missing = sorted(k for k in expected if k not in names)
    unexpected = sorted(v for k, v in names.items() if k not in expected)
    if missing or unexpected:
        raise CheckpointError(f"{f.path}: tensors do not match its config (missing "
                              f"{[m.removeprefix(TRANSFORMER_PREFIX) for m in missing[:4]]}"
                              f"{'...' if len(missing) > 4 else ''}, unexpected "
                              f"{unexpected[:4]}); the file is incomplete or was made for "
                              f"another model: {CONVERT_HINT}")
    for key, want in expected.items():
        problem = _check_tensor(f, names[key], want)
        if problem:
            raise CheckpointError(f"{f.path}: {problem}; {CONVERT_HINT}")
    state: dict[str, torch.Tensor] = {}
    for key, want in expected.items():
        name = names[key]
        if len(want) == 1:  # norms: float values
            state[key] = _finite(f, name, f.values(name).float(), FLOAT_LIMIT)
            continue
        state[key] = _check_scales(f, name, f.raw(name)).to(device)
        state[key.removesuffix("weight") + "ggml_type"] = torch.tensor(ggml.BLOCK[f.kind(name)][0])
    return state


def _vq(f: GGUFFile, device: torch.device) -> tuple[Any, int]:
    from diffusers import VQModel

    config = f.json(KEYS["vqvae"])
    channels = check_vq_config(config, f"{f.path} ({KEYS['vqvae']})")
    try:
        vq = VQModel.from_config(config)
    except Exception as exc:
        raise CheckpointError(f"{f.path}: {KEYS['vqvae']} is not a VQModel config ({exc}); "
                              f"{CONVERT_HINT}") from None
    want = {k: list(v.shape) for k, v in vq.state_dict().items()}
    have = {k.removeprefix("vq."): k for k in f.tensors if k.startswith("vq.")}
    if set(want) != set(have):
        gone = sorted(set(want) - set(have))[:3]
        raise CheckpointError(f"{f.path}: the VQ-VAE tensors do not match its config (missing "
                              f"{gone}, unexpected {sorted(set(have) - set(want))[:3]}); "
                              f"{CONVERT_HINT}")
    state = {}
    for key, name in have.items():
        kind, shape = f.kind(name), f.shape(name)
        if kind not in ("F32", "F16", "BF16") or shape != want[key]:
            raise CheckpointError(f"{f.path}: {name} is {kind} {tuple(shape)}; the VQ-VAE must "
                                  f"be float of shape {tuple(want[key])}; {CONVERT_HINT}")
        state[key] = _finite(f, name, f.values(name).float(), FLOAT_LIMIT)
    vq.load_state_dict(state, strict=True)
    return vq.to(device).eval().requires_grad_(False), 2 ** (len(channels) - 1)


def load_gguf_checkpoint(path: Path, device: torch.device, dtype: torch.dtype,
                         operations: Any = None, weights_device: torch.device | None = None
                         ) -> LoadedCheckpoint:
    """Transformer, tokenizer and VQ-VAE from one GGUF file (module docstring); everything is
    checked before the first layer is built."""
    from tokenizers import Tokenizer

    f = read_gguf(path)
    raw = f.json(KEYS["config"])
    config, ids = parse_config(raw, f"{f.path} ({KEYS['config']})")
    try:
        tokenizer = Tokenizer.from_str(f.string(KEYS["tokenizer"]) or "")
    except Exception as exc:
        raise CheckpointError(f"{f.path}: {KEYS['tokenizer']} is missing or cannot be parsed "
                              f"({exc}); {CONVERT_HINT}") from None
    check_tokenizer(tokenizer, ids, f"{f.path} ({KEYS['tokenizer']})")
    state = _transformer_state(f, config, weights_device or device)
    vq, vq_factor = _vq(f, device)
    with torch.device("meta"):
        model = LLaDAModel(config, init_std=None, operations=gguf_ops(operations, dtype))
    state = {k: (v.to(device=weights_device or device, dtype=dtype) if v.is_floating_point()
                 else v) for k, v in state.items()}
    model.load_state_dict(state, strict=True, assign=True)
    return LoadedCheckpoint(model.eval().requires_grad_(False), config, ids, tokenizer, vq,
                            vq_factor, raw, None)
