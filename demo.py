"""The main job: one real image from the shipped DiMOO-nano model with LADR, on the CPU.

    python demo.py --prompt "a red circle to the left of a blue square" --out demo.png

Generates the prompt with LADR and, side by side in the same run, with the official baseline
sampler (same seed, T = 64), writes the LADR image to --out (and the baseline image next to it
unless --no-baseline), and prints NFE, wall time and the speedup of LADR over the baseline.
The LADR policy defaults to the "nano" preset (tuned on nano's validation prompts; it runs
--steps like any rule, never more forward passes than the baseline at them) for the shipped model and to the paper's for any other checkpoint. Uses only
names ``ladr_core`` exports (``load_dimoo``, ``LADR.preset``, ``DiMOOPipeline.generate``); the
DiMOO Sampler node makes the same ``generate`` call.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
from PIL import Image


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--prompt", default="a red circle to the left of a blue square", help="text prompt")
    p.add_argument("--out", default="demo.png", help="PNG written for the LADR image")
    p.add_argument("--model", default=None, help="checkpoint folder (default: shipped nano)")
    p.add_argument("--policy", default=None, help="LADR policy preset (default: nano for the "
                   "shipped model, else paper)")
    p.add_argument("--steps", type=int, default=64,
                   help="LADR schedule steps T, the price (default 64)")
    p.add_argument("--baseline-steps", type=int, default=64, help="baseline T (default 64)")
    p.add_argument("--cfg", type=float, default=None,
                   help="CFG scale s: (1+s)*cond - s*uncond (default: the model's default_cfg)")
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature")
    p.add_argument("--seed", type=int, default=0, help="seed (0 is a seed like any other)")
    p.add_argument("--size", type=int, default=None, help="image side in pixels (default: model's)")
    p.add_argument("--no-baseline", action="store_true", help="skip the baseline comparison run")
    return p.parse_args(argv)


def _save(image: torch.Tensor, path: Path, scale: int) -> None:
    """image: FloatTensor [H, W, 3] in [0, 1] -> PNG, nearest-upscaled by `scale` for viewing."""
    arr = (image.clamp(0, 1).float().cpu().numpy() * 255.0).round().astype(np.uint8)
    img = Image.fromarray(arr)
    if scale > 1:
        img = img.resize((img.width * scale, img.height * scale), Image.NEAREST)
    img.save(path)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    import ladr_core

    path = Path(args.model) if args.model else ladr_core.nano_model_path()
    pipe = ladr_core.load_dimoo(path, device="cpu", dtype=torch.float32)
    size = args.size or pipe.default_size
    cfg = pipe.default_cfg if args.cfg is None else args.cfg
    preset = args.policy or ("paper" if args.model else "nano")
    if preset not in ladr_core.PRESETS:
        raise SystemExit(f"--policy: {preset!r} is not a preset; choose one of "
                         f"{sorted(ladr_core.PRESETS)}")
    strategy = ladr_core.LADR.preset(preset)
    steps = args.steps
    common = dict(width=size, height=size, cfg=cfg, temperature=args.temperature, seed=args.seed)

    # One untimed step first: the first forward pays torch's one-time set-up (~4 s on this CPU),
    # which would otherwise be charged to whichever strategy runs first.
    pipe.generate(args.prompt, **common, steps=1, decode=False)
    ladr = pipe.generate(args.prompt, strategy=strategy, steps=steps, **common)
    out = Path(args.out)
    scale = max(1, 256 // size)
    _save(ladr.images[0], out, scale)
    print(f"prompt   : {args.prompt!r} ({size}x{size}, cfg={cfg}, seed={args.seed})")
    print(f"LADR     : policy {preset}, T={steps}: {ladr.steps:3d} steps, NFE {ladr.nfe:3d}, "
          f"{ladr.seconds:6.2f} s -> {out}")
    if args.no_baseline:
        return 0
    base = pipe.generate(args.prompt, strategy="baseline", steps=args.baseline_steps, **common)
    base_out = out.with_name(out.stem + "_baseline" + out.suffix)
    _save(base.images[0], base_out, scale)
    print(f"baseline : T={args.baseline_steps}: {base.steps:3d} steps, NFE {base.nfe:3d}, "
          f"{base.seconds:6.2f} s -> {base_out}")
    print(f"speedup  : {base.nfe / ladr.nfe:.2f}x fewer forward passes, "
          f"{base.seconds / ladr.seconds:.2f}x wall time (measured in this run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
