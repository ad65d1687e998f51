"""The emoji testbed's stages: ``python -m lab.emoji.build STAGE [--force]``.

  install   npm tarballs of the pinned packages -> the cache (lab/emoji/packages.py)
  bank      every vocabulary emoji in every style -> cache/bank-v1 (manifest + checksums)
  vq        the learned VQ (diffusers VQModel) -> cache/model/vqvae (resumable)
  codes     training scenes encoded by the VQ -> cache/runs/codes.pt
  transformer  the DiMOO-layout transformer (resumable) -> cache/model
  curve     the learning curves so far -> lab/results/emoji_training.json
The judge is trained and measured by ``python -m lab.emoji.judge_eval``.
Everything trained stays in the cache (``$LADR_EMOJI_CACHE`` or ~/.cache/comfyui-ladr/emoji).
"""

from __future__ import annotations

import argparse

import torch

from lab.emoji.bank import build_bank
from lab.emoji.packages import EmojiDataError, install

STAGES = ("install", "bank", "vq", "vq-score", "codes", "transformer", "curve")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("stage", choices=STAGES)
    ap.add_argument("--force", action="store_true", help="install / bank: redo from scratch")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (at most 2 here)")
    ap.add_argument("--vq-steps", type=int, default=3000, help="vq: total steps of the run")
    ap.add_argument("--vq-styles", default="noto,twemoji",
                    help="vq: the styles its training scenes are drawn in (comma-separated)")
    ap.add_argument("--scenes", type=int, default=100, help="vq-score: test scenes per category")
    ap.add_argument("--results", default="emoji_vq.json",
                    help="vq-score: the results file it writes under lab/results/")
    ap.add_argument("--tf-steps", type=int, default=30000, help="transformer: total steps of the run")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    try:
        _run(args)
    except EmojiDataError as exc:
        raise SystemExit(f"error: {exc}") from None


def _run(args: argparse.Namespace) -> None:
    if args.stage == "install":
        install(force=args.force)
    elif args.stage == "bank":
        build_bank(force=args.force)
    else:
        from lab.emoji import train
        from lab.emoji.vq import VQTrainConfig

        if args.stage == "vq":
            train.stage_vq(VQTrainConfig(steps=args.vq_steps), tuple(args.vq_styles.split(",")))
        elif args.stage == "vq-score":
            train.stage_vq_score(args.scenes, args.results)
        elif args.stage == "codes":
            train.stage_codes()
        elif args.stage == "transformer":
            train.stage_transformer(args.tf_steps)
        else:
            train.stage_curve()


if __name__ == "__main__":
    main()
