"""Loader peak memory: a ~2 GB synthetic bf16 checkpoint loaded into bf16, vs its weight size.

A synthetic checkpoint in the official Lumina-DiMOO layout (config.json, bf16 safetensors shards
+ model.safetensors.index.json, tokenizer.json, vqvae/) is written once to a cache folder
(default /tmp/ladr_bench_ckpt_2gb): a LLaDA config of 12 layers x 2048 d with the real DiMOO
vocabulary (126 464 rows in wte and ff_out), 1.14 B parameters = 2.27 GB in bf16, in 4 shards.
The tokenizer and the VQ-VAE are the tests' tiny ones (tests/kit/tiny_checkpoint.py), with their
special-token ids in config.json, so ``load_dimoo`` loads the folder end to end.

Each measurement runs in a fresh interpreter and reads its peak resident set (``VmHWM`` of
/proc/self/status):

* ``baseline``: python + ``import torch, ladr_core`` + the loader's imports (diffusers,
  tokenizers, safetensors) - subtracted from the others;
* ``load_dimoo``: ``ladr_core.load_dimoo(folder, dtype=torch.bfloat16)``, then every parameter
  is read once (``p.sum()``): bf16 tensors read from bf16 safetensors can stay mmap-backed
  (zero-copy, ``RssFile``) and only count once touched, so the peak is taken after touching;
  ``after_load_untouched`` records the status before that;
* ``naive`` (reference): a bf16 model built with random init, then every shard read with
  ``safetensors.torch.load_file`` and ``load_state_dict`` - what a straightforward loader does.

Figure: (peak - baseline) / bf16 weight bytes. Target <= 1.3.
``--weight-dtype fp8_e4m3fn``: the same folder converted to fp8 while loading (block linears in
fp8 + scales, the rest bf16); the figure is then (peak - baseline) / bytes of the resulting
model's state dict (``result_bytes``), target <= 1.3, written to ``loader_memory_<dtype>.json``.
Run: ``python -m lab.benchmarks.loader_memory [--cache-dir DIR] [--no-naive] [--weight-dtype D]``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import torch

from lab.benchmarks.common import (
    apply_threads,
    base_parser,
    print_table,
    ratio,
    run_memory_probe,
    write_result,
)

TARGET = 1.3
BIG = dict(d_model=2048, n_heads=16, n_layers=12, mlp_hidden_size=5632, vocab_size=126464,
           embedding_size=126464, max_sequence_length=4096, rope_theta=500000.0)
TINY = dict(d_model=64, n_heads=4, n_layers=2, mlp_hidden_size=128, vocab_size=4096,
            embedding_size=4096, max_sequence_length=256, rope_theta=500000.0)
VERSION = 2  # bump when the writer changes so cached folders are rewritten

IMPORTS = "import torch, ladr_core, safetensors.torch, tokenizers, diffusers\n"
LOAD = IMPORTS + ("import ladr_core.dimoo.pipeline\n"
                  "pipe = ladr_core.load_dimoo(sys.argv[1] if len(sys.argv) > 1 else FOLDER, "
                  "dtype=torch.bfloat16, weight_dtype=WEIGHT_DTYPE)\n"
                  "extra['params'] = sum(p.numel() for p in pipe.transformer.parameters())\n"
                  "extra['result_bytes'] = sum(t.numel() * t.element_size() "
                  "for t in pipe.transformer.state_dict().values())\n"
                  "extra['dtype'] = str(next(pipe.transformer.parameters()).dtype)\n"
                  "extra['after_load_untouched'] = status()\n"
                  "for p in pipe.transformer.parameters():\n"
                  "    (p.view(torch.uint8) if p.element_size() == 1 else p).sum()  # page in (mmap)\n")
NAIVE = IMPORTS + ("import json\nfrom pathlib import Path\n"
                   "from safetensors.torch import load_file\n"
                   "from ladr_core.dimoo.model.config import LLaDAConfig\n"
                   "from ladr_core.dimoo.model.transformer import LLaDAModel\n"
                   "folder = Path(FOLDER)\n"
                   "cfg = LLaDAConfig.from_json(folder / 'config.json')\n"
                   "torch.set_default_dtype(torch.bfloat16)\n"
                   "model = LLaDAModel(cfg, init_std=None)\n"
                   "state = {}\n"
                   "for f in sorted(folder.glob('model-*.safetensors')):\n"
                   "    state.update(load_file(str(f)))\n"
                   "model.load_state_dict(state)\n"
                   "del state\n")


def layer_shapes(spec: dict[str, int]) -> dict[str, tuple[int, ...]]:
    """Official parameter names -> shapes for a LLaDA config (n_kv_heads = n_heads)."""
    d, h, v = spec["d_model"], spec["mlp_hidden_size"], spec["embedding_size"]
    shapes: dict[str, tuple[int, ...]] = {"model.transformer.wte.weight": (v, d),
                                          "model.transformer.ln_f.weight": (d,),
                                          "model.transformer.ff_out.weight": (v, d)}
    for i in range(spec["n_layers"]):
        p = f"model.transformer.blocks.{i}."
        shapes.update({p + "attn_norm.weight": (d,), p + "ff_norm.weight": (d,),
                       p + "q_proj.weight": (d, d), p + "k_proj.weight": (d, d),
                       p + "v_proj.weight": (d, d), p + "attn_out.weight": (d, d),
                       p + "ff_proj.weight": (h, d), p + "up_proj.weight": (h, d),
                       p + "ff_out.weight": (d, h)})
    return shapes


def write_synthetic(folder: Path, spec: dict[str, int], shards: int) -> int:
    """Write the checkpoint (bf16 shards written one at a time); return the weight bytes."""
    from safetensors.torch import save_file

    from tests.kit import tiny_checkpoint as fx

    folder.mkdir(parents=True, exist_ok=True)
    shapes = layer_shapes(spec)
    total = sum(torch.Size(s).numel() * 2 for s in shapes.values())
    groups: list[list[str]] = [[] for _ in range(shards)]
    acc, per = 0, total / shards
    for name, shape in shapes.items():
        groups[min(int(acc // per), shards - 1)].append(name)
        acc += torch.Size(shape).numel() * 2
    weight_map: dict[str, str] = {}
    g = torch.Generator().manual_seed(0)
    for i, names in enumerate(groups):
        fname = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: (torch.randn(shapes[n], generator=g) * 0.02).to(torch.bfloat16) for n in names}
        save_file(part, str(folder / fname), metadata={"format": "pt"})
        weight_map.update({n: fname for n in names})
        del part
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": total}, "weight_map": weight_map}, indent=1))
    vocab, ids, _ = fx.tiny_vocab()
    # image codes are the last codebook_size logits, as the loader requires (config.py)
    offset = {"image_token_offset": spec["embedding_size"] - ids.codebook_size}
    config = {**spec, "model_type": "llada", "architectures": ["LLaDAModelLM"],
              "activation_type": "silu", "block_type": "llama", "rope": True,
              "layer_norm_type": "rms", "weight_tying": False, **ids.to_config_dict(), **offset}
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    fx.write_tokenizer(folder, vocab)
    fx.write_vqvae(folder, seed=0)
    (folder / "BENCH_VERSION").write_text(json.dumps({"version": VERSION, "spec": spec,
                                                      "shards": shards, "bytes": total}))
    return total


def ensure_checkpoint(folder: Path, spec: dict[str, int], shards: int) -> int:
    stamp = folder / "BENCH_VERSION"
    if stamp.is_file():
        info = json.loads(stamp.read_text())
        if info.get("version") == VERSION and info.get("spec") == spec and info["shards"] == shards:
            return int(info["bytes"])
    shutil.rmtree(folder, ignore_errors=True)
    return write_synthetic(folder, spec, shards)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--no-naive", action="store_true", help="skip the naive reference load")
    parser.add_argument("--weight-dtype", default="default",
                        help="default | fp8_e4m3fn | fp8_e5m2 (fp8: convert while loading)")
    args = parser.parse_args(argv)
    apply_threads(args)
    spec = TINY if args.tiny else BIG
    folder = args.cache_dir or Path("/tmp") / ("ladr_bench_ckpt_tiny" if args.tiny
                                               else "ladr_bench_ckpt_2gb")
    weight_bytes = ensure_checkpoint(folder, spec, args.shards)
    fp8 = args.weight_dtype != "default"
    prefix = f"FOLDER = {str(folder)!r}\nWEIGHT_DTYPE = {args.weight_dtype!r}\n"
    probes = {"baseline": run_memory_probe(prefix + IMPORTS),
              "load_dimoo": run_memory_probe(prefix + LOAD)}
    if not args.no_naive and not fp8:
        probes["naive"] = run_memory_probe(prefix + NAIVE)
    base = probes["baseline"]["VmHWM"]
    denom = probes["load_dimoo"]["result_bytes"] if fp8 else weight_bytes
    rows, result_cases = [], {}
    for name, p in probes.items():
        extra = p["VmHWM"] - base if name != "baseline" else 0
        r = ratio(extra, denom if name == "load_dimoo" else weight_bytes) if name != "baseline" else None
        result_cases[name] = {**p, "peak_minus_baseline": extra, "ratio_to_weights": r}
        rows.append({"case": name, "peak_MB": p["VmHWM"] / 2**20,
                     "peak_minus_baseline_MB": extra / 2**20, "ratio": r})
    what = (f"loaded as {args.weight_dtype}: {denom / 2**30:.2f} GiB result" if fp8 else
            "ratio to the bf16 weights")
    print_table(f"loader peak RSS, {weight_bytes / 2**30:.2f} GiB bf16 weights "
                f"in {args.shards} shards, {what} (target <= {TARGET}x)", rows)
    got = result_cases["load_dimoo"]["ratio_to_weights"]
    result = {"folder": str(folder), "config": spec, "shards": args.shards,
              "weight_bytes": weight_bytes, "weight_dtype": args.weight_dtype,
              "ratio_denominator_bytes": denom, "target_ratio": TARGET, "cases": result_cases,
              "ratio": got, "meets_target": got is not None and got <= TARGET}
    name = "loader_memory" + (f"_{args.weight_dtype}" if fp8 else "")
    print(f"wrote {write_result(name, result, args.out)}")
    return result


if __name__ == "__main__":
    main()
