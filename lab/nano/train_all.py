"""Regenerate the shipped DiMOO-nano checkpoint: ``python -m lab.nano.train_all [--stage ...]``.

Stages (each seeded, each re-runnable; later stages read what earlier ones wrote):
  tokenizer    tokenizer files                      -> ladr_core/assets/dimoo_nano/
  vq           VQModel on scene crops, decoder-only on full scenes, then decoder-only on
               canonical codes (one code per distinct token patch; PNG grid check)
                                                    -> ladr_core/assets/dimoo_nano/vqvae/
  codes        training scenes encoded to canonical VQ codes -> runs/nano/codes.pt
  transformer  LLaDA masked-diffusion training      -> ladr_core/assets/dimoo_nano/ (config + weights)
  cfg          guidance-scale sweep on validation prompts -> config.json default_cfg
`all` runs them in order. Scratch files (logs, periodic checkpoints, PNG grids) go to runs/nano/.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from lab.nano import scenes
from lab.nano.tokenizer import save_tokenizer
from lab.nano.vq import (
    CodeTable,
    build_code_table,
    decode_codes,
    finetune_decoder,
    save_grid,
    to_tensor,
    train_vq,
)

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "ladr_core" / "assets" / "dimoo_nano"
RUNS = ROOT / "runs" / "nano"
VQ_SCENES, VQ_SEED, VQ_STEPS, VQ_DECODER_STEPS, VQ_CANONICAL_STEPS = 4000, 1, 4000, 600, 400
TRAIN_SCENES, TRAIN_SEED = 20000, 2


def stage_tokenizer() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    tok = save_tokenizer(OUT)
    print(f"tokenizer: {len(tok)} tokens -> {OUT}")


def stage_vq(steps: int = VQ_STEPS) -> None:
    RUNS.mkdir(parents=True, exist_ok=True)
    images, _ = scenes.make_dataset(VQ_SCENES, VQ_SEED)
    t0 = time.time()
    vq, stats = train_vq(images, steps=steps, seed=VQ_SEED)
    stats.update(finetune_decoder(vq, images, steps=VQ_DECODER_STEPS, seed=VQ_SEED))
    table, table_stats = build_code_table(vq, np.concatenate([images, scenes.part_catalogue()]))
    stats.update(table_stats)
    stats.update(finetune_decoder(vq, images, steps=VQ_CANONICAL_STEPS, seed=VQ_SEED + 1,
                                  table=table))
    stats["train_s"] = round(time.time() - t0, 1)
    vq.save_pretrained(str(OUT / "vqvae"), safe_serialization=True)
    table.save(RUNS / "code_table.pt")
    test, _ = scenes.make_dataset(16, 999)
    codes = table.lookup(test)
    rec = decode_codes(vq, codes)
    both = torch.stack([to_tensor(test), rec], 1).flatten(0, 1)
    save_grid(both, RUNS / "vq_recon.png")
    stats["test_mae"] = float((rec - to_tensor(test)).abs().mean())
    (RUNS / "vq_stats.json").write_text(json.dumps(stats, indent=1))
    print("vq done", stats)


def stage_codes() -> None:
    """Training scenes -> canonical codes through the vq stage's code table (no encoder pass:
    the table is what the decoder was fine-tuned on)."""
    images, sc = scenes.make_dataset(TRAIN_SCENES, TRAIN_SEED)
    t0 = time.time()
    codes = CodeTable.load(RUNS / "code_table.pt").lookup(images)
    torch.save({"codes": codes.to(torch.int16), "captions": [s.caption for s in sc],
                "categories": [s.spec.category for s in sc]}, RUNS / "codes.pt")
    used = int(codes.unique().numel())
    print(f"codes: {tuple(codes.shape)} in {time.time() - t0:.0f}s, {used} distinct codes")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--stage", default="all",
                    choices=["all", "tokenizer", "vq", "codes", "transformer", "cfg"])
    ap.add_argument("--threads", type=int, default=1,
                    help="intra-op threads (1 is fastest for these small ops on a busy 2-core box)")
    ap.add_argument("--vq-steps", type=int, default=VQ_STEPS)
    ap.add_argument("--tf-steps", type=int, default=None, help="transformer steps (default: TrainConfig)")
    ap.add_argument("--max-minutes", type=float, default=0.0,
                    help="transformer wall budget; stops early and saves (0 = run all steps)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    RUNS.mkdir(parents=True, exist_ok=True)
    if args.stage in ("all", "tokenizer"):
        stage_tokenizer()
    if args.stage in ("all", "vq"):
        stage_vq(args.vq_steps)
    if args.stage in ("all", "codes"):
        stage_codes()
    if args.stage in ("all", "transformer"):
        import dataclasses

        from lab.nano.train_transformer import TrainConfig, stage_transformer

        cfg = TrainConfig(max_minutes=args.max_minutes)
        if args.tf_steps:
            cfg = dataclasses.replace(cfg, steps=args.tf_steps)
        stage_transformer(OUT, RUNS, cfg)
    if args.stage in ("all", "cfg"):
        from lab.nano.tune_cfg import stage_cfg

        stage_cfg(OUT, RUNS)


if __name__ == "__main__":
    main()
