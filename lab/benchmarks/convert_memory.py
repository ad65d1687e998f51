"""Converter peak memory: the 2 GB synthetic checkpoint converted to each format, vs its tensors.

Uses ``lab.benchmarks.loader_memory``'s synthetic checkpoint (12 layers x 2048, the DiMOO vocabulary:
1.14 B parameters, 2.27 GB of bf16 in 4 shards; its largest tensor, the embedding, is 0.52 GB)
and measures, each in a fresh interpreter, the peak resident set (``VmHWM``) above the import
baseline of:

* ``gguf_q4_k_m``: ``write_gguf(folder, out, "Q4_K_M")`` (the output goes to disk);
* ``comfy_int8`` / ``comfy_fp8`` / ``fp8``: ``convert_folder`` into ComfyUI's int8 and fp8
  (without calibration) and the pack's per-channel fp8 (each output shard is streamed to disk);
* ``calibrate``: ``measure_input_ranges`` on two prompts at 32 px (weights read per linear).

Figures: peak / largest source tensor and peak / total weights. "About one layer": a ratio to
the largest tensor near 1-3 (the tensor in its source dtype, its converted bytes, a chunk of
float32 temporaries) and far below the model.

    python -m lab.benchmarks.convert_memory [--cache-dir DIR] [--tiny]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lab.benchmarks.common import (
    apply_threads,
    base_parser,
    print_table,
    run_memory_probe,
    write_result,
)
from lab.benchmarks.loader_memory import BIG, TINY, ensure_checkpoint, layer_shapes

IMPORTS = ("import tempfile, torch, ladr_core, safetensors.torch, tokenizers, gguf\n"
           "from pathlib import Path\n"
           "from ladr_core.dimoo.weights.convert import Conversion, convert_folder\n"
           "from ladr_core.dimoo.input_ranges import measure_input_ranges\n"
           "from ladr_core.dimoo.weights.gguf_write import write_gguf\n"
           "out = Path(tempfile.mkdtemp())\n")
CASES = {
    "gguf_q4_k_m": "write_gguf(FOLDER, out / 'm.gguf', 'Q4_K_M')\n",
    "comfy_int8": "convert_folder(FOLDER, out / 'i8', Conversion('comfy_int8'))\n",
    "comfy_fp8": "convert_folder(FOLDER, out / 'f8', Conversion('comfy_fp8_e4m3fn'))\n",
    "fp8": "convert_folder(FOLDER, out / 'p8', Conversion('fp8_e4m3fn'))\n",
    "calibrate": "measure_input_ranges(FOLDER, ['a red circle', 'the blue square'], size=32)\n",
}
CLEAN = ("import shutil\n"
         "extra['output_bytes'] = sum(p.stat().st_size for p in out.rglob('*') if p.is_file())\n"
         "shutil.rmtree(out)\n")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--cases", default=",".join(CASES), help="comma list of " + ",".join(CASES))
    args = parser.parse_args(argv)
    apply_threads(args)
    spec = TINY if args.tiny else BIG
    folder = args.cache_dir or Path("/tmp") / ("ladr_bench_ckpt_tiny" if args.tiny
                                               else "ladr_bench_ckpt_2gb")
    weight_bytes = ensure_checkpoint(folder, spec, 4)
    largest = max(2 * _numel(s) for s in layer_shapes(spec).values())
    prefix = f"FOLDER = {str(folder)!r}\n"
    base = run_memory_probe(prefix + IMPORTS)["VmHWM"]
    cases, rows = {}, []
    for name in args.cases.split(","):
        probe = run_memory_probe(prefix + IMPORTS + CASES[name] + CLEAN)
        extra = probe["VmHWM"] - base
        cases[name] = {**probe, "peak_minus_baseline": extra,
                       "ratio_to_largest_tensor": extra / largest,
                       "ratio_to_weights": extra / weight_bytes}
        rows.append({"case": name, "peak_minus_baseline_MB": extra / 2**20,
                     "x_largest_tensor": extra / largest, "x_weights": extra / weight_bytes,
                     "output_MB": probe.get("output_bytes", 0) / 2**20})
    print_table(f"converter peak RSS above imports; {weight_bytes / 2**30:.2f} GiB bf16 weights, "
                f"largest tensor {largest / 2**20:.0f} MiB", rows)
    result = {"folder": str(folder), "config": spec, "weight_bytes": weight_bytes,
              "largest_tensor_bytes": largest, "baseline_VmHWM": base, "cases": cases}
    print(f"wrote {write_result('convert_memory', result, args.out)}")
    return result


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


if __name__ == "__main__":
    main()
