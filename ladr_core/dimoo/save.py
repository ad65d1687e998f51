"""Convert an official Lumina-DiMOO folder once into a smaller one ``load_dimoo`` reads directly.

    python -m ladr_core.dimoo.save SRC DST --weight-dtype FORMAT

FORMAT (docs/reports/QUANTIZATION.md says which to pick):

* ``fp8_e4m3fn`` / ``fp8_e5m2``: the pack's fp8 (fp8.py: block linears with a float32 scale
  per output channel, computed in the compute dtype after a cast).
* ``comfy_fp8_e4m3fn`` / ``comfy_fp8_e5m2`` / ``comfy_int8``: ComfyUI's quantized format
  (quant.py), so ComfyUI's fast fp8 / int8 matmuls apply. ``--input-scale calibrate``
  (default) measures the fp8 inputs' ranges first (input_ranges.py); ``none`` writes no input
  scale (ComfyUI then clips inputs at the fp8 max).
* ``Q8_0`` / ``Q5_K_M`` / ``Q4_K_M``: one self-contained GGUF file (gguf_write.py); DST ends in
  ``.gguf``.

Folders are written tensor by tensor in the official layout through a staging folder
(weights/convert.py): a conversion that dies half-way never leaves a folder that loads.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import torch

from .weights import formats, fp8, quant
from .weights.convert import (
    SHARD_BYTES,
    Conversion,
    by_rows,
    check_paths,
    convert_folder,
    copy_support_files,
    write_shards,
)
from .weights.files import resolve_dtype
from .weights.staging import staged_folder

__all__ = ["save_dimoo", "convert_folder", "main", "FORMATS", "Conversion", "by_rows"]

FORMATS = formats.save_choices()
"""Every ``--weight-dtype`` choice: the save choices of the registered weight formats."""


def _state_layers(model: torch.nn.Module) -> dict[str, str]:
    """{layer: ComfyUI format} of a loaded model's ``QuantLinear`` layers."""
    return {name: m.quant_format for name, m in model.named_modules()
            if isinstance(m, quant.QuantLinear) and m.quant_format is not None}


def save_dimoo(pipe: Any, folder: str | Path, source: str | Path | None = None,
               shard_bytes: int = SHARD_BYTES) -> Path:
    """Write ``pipe`` (e.g. loaded with fp8) to a new or empty ``folder``, copying the
    tokenizer, configs and ``vqvae/`` of ``source`` (default ``pipe.source_folder``)."""
    out = Path(folder).expanduser()
    src = Path(source or pipe.source_folder or "").expanduser()
    check_paths(src, out)
    state = {k: v.detach() for k, v in pipe.transformer.state_dict().items() if v is not None}
    layers = _state_layers(pipe.transformer)
    stored = sorted({str(t.dtype).removeprefix("torch.").replace("float8", "fp8")
                     for t in state.values() if t.element_size() == 1 and t.is_floating_point()})
    label = ",".join(sorted(set(layers.values()))) or ",".join(stored) or "default"
    entries = [(k, v.dtype, list(v.shape)) for k, v in state.items()]
    with staged_folder(out) as tmp:
        copy_support_files(src, tmp, label)
        write_shards(tmp, entries, state.__getitem__, layers, shard_bytes)
    return out


def _input_ranges(a: argparse.Namespace) -> Any:
    """The comfy fp8 formats' input ranges, measured on sample prompts only when a format
    asks (``SaveOptions.input_amax``), with the ``--margin`` applied."""

    def measure() -> dict[str, float]:
        from .input_ranges import measure_input_ranges, range_prompts

        amax = measure_input_ranges(a.source, range_prompts(a.calibration_prompts),
                                    a.calibration_size, device=a.device)
        return {k: v * a.margin for k, v in amax.items()}

    return measure


def main(argv: list[str] | None = None) -> Path:
    """The command line (module docstring); bad input exits with its one-line message."""
    try:
        return _main(argv)
    except (ValueError, RuntimeError) as exc:  # CheckpointError is a RuntimeError
        raise SystemExit(f"error: {exc}") from None


def _main(argv: list[str] | None) -> Path:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("source", help="official Lumina-DiMOO folder (bf16 safetensors)")
    ap.add_argument("out", help="new folder (or NAME.gguf for the GGUF formats)")
    ap.add_argument("--weight-dtype", default="fp8_e4m3fn", choices=FORMATS,
                    help="the save choices of the registered weight formats (weights/formats/)")
    ap.add_argument("--fp8-scale", default="channel", choices=fp8.SCALE_KINDS,
                    help="pack fp8: one scale per output channel (default) or per tensor")
    ap.add_argument("--int8-scale", default="channel", choices=quant.SCALE_KINDS,
                    help="comfy_int8: one scale per output channel (default) or per tensor")
    ap.add_argument("--input-scale", default="calibrate", choices=("calibrate", "none"),
                    help="comfy fp8: calibrate the input scales on sample prompts, or none")
    ap.add_argument("--calibration-prompts", default=None,
                    help="text file, one prompt per line (default: calibrate.DEFAULT_PROMPTS)")
    ap.add_argument("--calibration-size", type=int, default=None,
                    help="image size in px for calibration (default: min(512, model default))")
    ap.add_argument("--margin", type=float, default=2.0,
                    help="input_scale = margin x calibrated max |input| / fp8 max")
    ap.add_argument("--dtype", default="bf16", help="storage dtype of what is not quantized")
    ap.add_argument("--device", default="cpu", help="where to convert / calibrate (cpu, cuda)")
    a = ap.parse_args(argv)
    options = formats.SaveOptions(resolve_dtype(a.dtype), a.fp8_scale, a.int8_scale, a.device,
                                  None if a.input_scale == "none" else _input_ranges(a))
    out = formats.save_format(a.weight_dtype).save(a.source, a.out, a.weight_dtype, options)
    print(f"wrote {out}")
    return out


if __name__ == "__main__":
    main()
