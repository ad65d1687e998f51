"""Native LLaDA forward vs the official ``modeling_llada.py``; batched CFG vs two calls.

Figures (fp32, random weights, one mid-size LLaDA config; defaults 8 layers x 1024 d,
1100 tokens):

* ``native_vs_official``: max |logit difference| and the time ratio official / native
  (>= 1.0 means the native model is at least as fast). Only when the official code is given
  with ``--official DIR`` or ``LADR_OFFICIAL_LLADA=DIR``: a folder holding the official
  ``modeling_llada.py`` and ``configuration_llada.py``, extracted locally, e.g.::

      mkdir -p /tmp/official_llada && for f in modeling_llada configuration_llada; do
        git -C <Lumina-DiMOO clone> show HEAD:model/$f.py > /tmp/official_llada/$f.py; done

  That code is never committed nor needed in CI (CI runs the native side only).
* ``cfg_batched_vs_two_calls``: one forward of batch 2 (conditional + unconditional rows) vs
  two forwards of batch 1, equal logits and the time ratio two-calls / batched.

Run: ``python -m lab.benchmarks.native_forward [--official /tmp/official_llada]``.
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from pathlib import Path
from typing import Any

import torch

from lab.benchmarks.common import (
    apply_threads,
    base_parser,
    interleaved,
    print_table,
    ratio,
    write_result,
)
from ladr_core.dimoo.model.config import LLaDAConfig
from ladr_core.dimoo.model.transformer import LLaDAModel

MID = dict(d_model=1024, n_heads=16, n_layers=8, mlp_hidden_size=2816, vocab_size=16384,
           max_sequence_length=2048, rope_theta=500000.0)
TINY = dict(d_model=64, n_heads=4, n_layers=2, mlp_hidden_size=96, vocab_size=512,
            max_sequence_length=256, rope_theta=500000.0)


def load_official(folder: Path) -> types.ModuleType:
    """Import the official ``modeling_llada`` from ``folder`` as package ``_official_llada``.

    The folder is a local extract of the official repository's ``model/`` files; nothing of it
    is stored in this project.
    """
    folder = Path(folder)
    missing = [f for f in ("modeling_llada.py", "configuration_llada.py")
               if not (folder / f).is_file()]
    if missing:
        raise FileNotFoundError(
            f"--official {folder}: missing {missing}; extract them from the official "
            "Lumina-DiMOO repository (model/modeling_llada.py, model/configuration_llada.py)")
    pkg = types.ModuleType("_official_llada")
    pkg.__path__ = [str(folder)]
    sys.modules["_official_llada"] = pkg
    return importlib.import_module("_official_llada.modeling_llada")


def build_official(module: types.ModuleType, cfg: LLaDAConfig,
                   state: dict[str, torch.Tensor]) -> torch.nn.Module:
    """Official ``LLaDAModelLM`` with the native model's weights (same parameter names)."""
    conf_mod = importlib.import_module("_official_llada.configuration_llada")
    fields = {k: v for k, v in cfg.to_dict().items() if k not in ("architectures",)}
    official_cfg = conf_mod.LLaDAConfig(**fields, init_device="cpu", flash_attention=False)
    model = module.LLaDAModelLM(official_cfg, init_params=False)
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise RuntimeError(f"official model names differ: missing {missing}, unexpected {unexpected}")
    return model.eval()


def make_inputs(cfg: LLaDAConfig, tokens: int, seed: int) -> torch.Tensor:
    """[2, tokens]: a conditional and an unconditional row of random ids."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, cfg.vocab_size, (2, tokens), generator=g)


def compare_official(native: LLaDAModel, official_dir: Path, ids: torch.Tensor,
                     reps: int) -> dict[str, Any]:
    official = build_official(load_official(official_dir), native.config, native.state_dict())
    x = ids[:1]
    with torch.inference_mode():
        ref = official(input_ids=x).logits
        out = native(x)
        diff = (out - ref).abs().max().item()
        t = interleaved({"native": lambda: native(x),
                         "official": lambda: official(input_ids=x).logits}, reps=reps)
    return {"max_abs_diff": diff, "max_abs_logit": ref.abs().max().item(),
            "native": t["native"].as_dict(), "official": t["official"].as_dict(),
            "speed_ratio_official_over_native": ratio(t["official"].median, t["native"].median)}


def compare_cfg(native: LLaDAModel, ids: torch.Tensor, reps: int) -> dict[str, Any]:
    def two_calls() -> torch.Tensor:
        return torch.cat([native(ids[:1]), native(ids[1:])])

    with torch.inference_mode():
        batched = native(ids)
        diff = (batched - two_calls()).abs().max().item()
        t = interleaved({"batched": lambda: native(ids), "two_calls": two_calls}, reps=reps)
    return {"max_abs_diff": diff, "batched": t["batched"].as_dict(),
            "two_calls": t["two_calls"].as_dict(),
            "speed_ratio_two_calls_over_batched": ratio(t["two_calls"].median, t["batched"].median)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--official", type=Path, default=os.environ.get("LADR_OFFICIAL_LLADA"),
                        help="folder with the official modeling_llada.py (local runs only)")
    parser.add_argument("--layers", type=int, default=None)
    parser.add_argument("--tokens", type=int, default=None)
    args = parser.parse_args(argv)
    apply_threads(args)
    spec = dict(TINY if args.tiny else MID)
    if args.layers:
        spec["n_layers"] = args.layers
    tokens = args.tokens or (40 if args.tiny else 1100)
    reps = args.reps or (2 if args.tiny else 3)
    torch.manual_seed(0)
    cfg = LLaDAConfig(**spec)
    native = LLaDAModel(cfg).eval()
    ids = make_inputs(cfg, tokens, seed=0)
    result: dict[str, Any] = {"config": spec, "tokens": tokens, "dtype": "float32",
                              "cfg_batched_vs_two_calls": compare_cfg(native, ids, reps)}
    if args.official:
        result["native_vs_official"] = compare_official(native, Path(args.official), ids, reps)
    else:
        result["native_vs_official"] = None
        print("official code not given (--official DIR / LADR_OFFICIAL_LLADA): native side only")
    rows = [{"case": "batched CFG (1 call, B=2)", "median_s": result["cfg_batched_vs_two_calls"]
             ["batched"]["median_s"], "ratio": 1.0},
            {"case": "two calls (B=1 x 2)", "median_s": result["cfg_batched_vs_two_calls"]
             ["two_calls"]["median_s"],
             "ratio": result["cfg_batched_vs_two_calls"]["speed_ratio_two_calls_over_batched"]}]
    off = result["native_vs_official"]
    if off:
        rows += [{"case": "native B=1", "median_s": off["native"]["median_s"], "ratio": 1.0},
                 {"case": "official B=1", "median_s": off["official"]["median_s"],
                  "ratio": off["speed_ratio_official_over_native"]}]
        print(f"native vs official max |diff| = {off['max_abs_diff']:.3e}")
    print_table(f"forward, {spec['n_layers']} layers x {spec['d_model']} d, {tokens} tokens, fp32",
                rows)
    path = write_result("native_forward", result, args.out)
    print(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()
