"""Save a loaded DiMOO (e.g. converted to fp8) once, as a folder ``load_dimoo`` reads directly.

    python -m ladr_core.dimoo.save SRC_FOLDER OUT_FOLDER --weight-dtype fp8_e4m3fn

The output has the official layout: the source's config.json, tokenizer files and ``vqvae/``
copied, the transformer in ``model-0000k-of-0000n.safetensors`` shards with
``model.safetensors.index.json``, official tensor names; fp8 block linears add
``<name>.weight_scale`` (float32 [out]). config.json gains ``ladr_weight_dtype`` (informative:
the loader reads the storage from the tensors). Loading it: ``load_dimoo(OUT_FOLDER)`` (fp8 as
stored, no conversion pass, about half the bytes to read).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

import torch

from .checkpoint import INDEX_FILE, PICKLE_SUFFIXES, SINGLE_FILE

__all__ = ["save_dimoo", "main"]

SHARD_BYTES = 4 * 2**30


def _weight_dtype(state: dict[str, torch.Tensor]) -> str:
    fp8 = {str(t.dtype).removeprefix("torch.") for t in state.values() if t.element_size() == 1
           and t.is_floating_point()}
    return ",".join(sorted(f.replace("float8", "fp8") for f in fp8)) or "default"


def _copy_support_files(source: Path, out: Path, weight_dtype: str) -> None:
    """config.json (+ ladr_weight_dtype), tokenizer and other small files, vqvae/."""
    for item in source.iterdir():
        if item.is_dir():
            if item.name == "vqvae":
                shutil.copytree(item, out / item.name, dirs_exist_ok=True)
            continue
        weights = item.suffix == ".safetensors" or item.name == INDEX_FILE
        if weights or item.suffix in PICKLE_SUFFIXES or item.suffix == ".py":
            continue
        if item.name == "config.json":
            config = json.loads(item.read_text(encoding="utf-8"))
            config["ladr_weight_dtype"] = weight_dtype
            (out / item.name).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        else:
            shutil.copy2(item, out / item.name)


def _shards(state: dict[str, torch.Tensor], shard_bytes: int) -> list[list[str]]:
    groups: list[list[str]] = [[]]
    size = 0
    for key, tensor in state.items():
        nbytes = tensor.numel() * tensor.element_size()
        if groups[-1] and size + nbytes > shard_bytes:
            groups.append([])
            size = 0
        groups[-1].append(key)
        size += nbytes
    return groups


def save_dimoo(pipe: Any, folder: str | Path, source: str | Path | None = None,
               shard_bytes: int = SHARD_BYTES) -> Path:
    """Write ``pipe`` (a ``DiMOOPipeline``) to a new ``folder``; returns it.

    ``source``: the folder the pipeline was loaded from (default: ``pipe.source_folder``); its
    tokenizer, configs and ``vqvae/`` are copied. ``folder`` must not exist or be empty.
    """
    from safetensors.torch import save_file

    out = Path(folder).expanduser()
    src = Path(source or pipe.source_folder or "").expanduser()
    if not (src / "config.json").is_file():
        raise ValueError(f"source {str(src)!r} has no config.json; pass source= the folder the "
                         "pipeline was loaded from")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"{out} exists and is not an empty folder; pick a new folder")
    if out.resolve() == src.resolve():
        raise ValueError("the output folder must differ from the source folder")
    state = pipe.transformer.state_dict()
    out.mkdir(parents=True, exist_ok=True)
    _copy_support_files(src, out, _weight_dtype(state))
    groups = _shards(state, shard_bytes)
    weight_map: dict[str, str] = {}
    total = 0
    for i, keys in enumerate(groups):
        name = f"model-{i + 1:05d}-of-{len(groups):05d}.safetensors"
        part = {k: state[k].detach().to("cpu").contiguous() for k in keys}
        save_file(part, str(out / name), metadata={"format": "pt"})
        total += sum(t.numel() * t.element_size() for t in part.values())
        weight_map.update({k: name for k in keys})
        del part
    (out / INDEX_FILE).write_text(json.dumps({"metadata": {"total_size": total},
                                              "weight_map": weight_map}, indent=1) + "\n")
    (out / SINGLE_FILE).unlink(missing_ok=True)
    return out


def main(argv: list[str] | None = None) -> Path:
    from .pipeline import load_dimoo

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("source", help="official Lumina-DiMOO folder (bf16 safetensors)")
    ap.add_argument("out", help="new folder to write")
    ap.add_argument("--weight-dtype", default="fp8_e4m3fn", help="fp8_e4m3fn | fp8_e5m2 | default")
    ap.add_argument("--fp8-scale", default="channel", help="channel (default) | tensor")
    ap.add_argument("--dtype", default="bf16", help="compute/storage dtype of the rest (bf16)")
    ap.add_argument("--device", default="cpu", help="where to convert (cpu, cuda)")
    a = ap.parse_args(argv)
    pipe = load_dimoo(a.source, device=a.device, dtype=a.dtype, weight_dtype=a.weight_dtype,
                      fp8_scale=a.fp8_scale)
    out = save_dimoo(pipe, a.out, source=a.source)
    print(f"wrote {out}")
    return out


if __name__ == "__main__":
    main()
