"""The emoji testbed's stages: ``python -m lab.emoji.build STAGE [--force]``.

  install   npm tarballs of the pinned packages -> the cache (lab/emoji/packages.py)
  bank      every vocabulary emoji in every style -> cache/bank-v1 (manifest + checksums)
  judge     the independent judge, trained on Noto + Twemoji pictures -> cache/judge
  vq        the learned VQ (diffusers VQModel) -> cache/model/vqvae (resumable)
  codes     training scenes encoded by the VQ -> cache/runs/codes.pt
  transformer  the DiMOO-layout transformer (resumable) -> cache/model
Everything trained stays in the cache (``$LADR_EMOJI_CACHE`` or ~/.cache/comfyui-ladr/emoji).
"""

from __future__ import annotations

import argparse

import torch

from lab.emoji.bank import build_bank
from lab.emoji.packages import EmojiDataError, install


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("stage", choices=["install", "bank"])
    ap.add_argument("--force", action="store_true", help="redo the stage from scratch")
    ap.add_argument("--threads", type=int, default=2, help="torch threads (at most 2 here)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    try:
        if args.stage == "install":
            install(force=args.force)
        elif args.stage == "bank":
            build_bank(force=args.force)
    except EmojiDataError as exc:
        raise SystemExit(f"error: {exc}") from None


if __name__ == "__main__":
    main()
