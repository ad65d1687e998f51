"""Ship the emoji model as the pack's second built-in (issue 51 item 7):
``python -m lab.emoji.ship --checkpoint CKPT --guidance lab/results/emoji_guidance.json``.

Exports the training checkpoint (`lab.emoji.train.export_checkpoint`, which needs the run's
``codes.pt`` beside it, and copies the tokenizer and ``vqvae/`` of the cache's model folder)
into the official folder layout at ``--out`` (default ``ladr_core/assets/dimoo_emoji``, the
folder ``ladr_core.emoji_model_path()`` names), with:

* the transformer's and the VQ's weights stored in float16 (the pack loads them into its
  compute dtype: float32 on a CPU), so the pair fits the issue's 5 MB; the folder's weight
  bytes are measured and a folder over `MAX_WEIGHT_BYTES` is refused;
* ``default_cfg`` in config.json: the pick of the guidance file, which must have been tuned on
  this checkpoint's step (`lab.emoji.guidance.tuned_cfg`), and `TESTBED_KEY` recording the
  training step and the guidance file it came from;
* ``calibration_prompts.txt``: VALIDATION-split captions (never the test prompts), the list
  DiMOO Calibrate and ``python -m ladr_core.calibrate`` use for this checkpoint;
* ``LICENSE.md``: the artwork the weights were trained on, its licenses and attributions;
* ``vqvae/preview_table.safetensors``: the live preview's colours fitted on the model's own
  decodes (as lab/nano/fit_preview_table.py fits nano's), from pictures of every emoji alone
  and of the validation captions; codes they never use keep the decoder-probe value.

Everything is written into a hidden temporary folder beside ``--out`` and renamed into place
only when complete: a half-written built-in is never left.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

ROOT = Path(__file__).resolve().parents[2]
MAX_WEIGHT_BYTES = 5_000_000
"""The issue's 5 MB (decimal) for a built-in's weights (every *.safetensors of the folder)."""
WEIGHT_DTYPE = torch.float16
TESTBED_KEY = "ladr_testbed"
CALIBRATION_PROMPTS = 48  # as many as the built-in nano's list
LICENSE_FILE = "LICENSE.md"
WEIGHT_FILES = ("model.safetensors", "vqvae/diffusion_pytorch_model.safetensors")


def default_out() -> Path:
    from ladr_core import emoji_model_path

    return emoji_model_path()


def to_half(path: Path) -> None:
    """Rewrite a safetensors file with its floating tensors in `WEIGHT_DTYPE` (metadata kept)."""
    from safetensors import safe_open

    with safe_open(str(path), "pt") as f:
        meta = f.metadata()
    tensors = {k: v.to(WEIGHT_DTYPE) if v.is_floating_point() else v
               for k, v in load_file(str(path)).items()}
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path), metadata=meta)


def weight_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*.safetensors") if p.is_file())


def check_size(folder: Path, limit: int) -> int:
    """The folder's weight bytes; one clear refusal above `limit`."""
    size = weight_bytes(folder)
    if size > limit:
        raise SystemExit(f"error: the emoji model's weights take {size / 1e6:.2f} MB, over the "
                         f"{limit / 1e6:g} MB a built-in model may hold (issue 51): it is not "
                         "shipped; keep it in lab/ (python -m lab.emoji.build rebuilds it) or "
                         "train a smaller one")
    return size


VQ_STYLES = ("noto", "twemoji", "openmoji")
"""The styles the VQ in use was trained on (docs/reports/EMOJI.md: the all-styles VQ,
``python -m lab.emoji.build vq --vq-styles noto,twemoji,openmoji``); ``--vq-styles`` for
another. The VQ folder records no styles of its own, so this is said, not read."""


def license_text(step: int, vq_seen: list[str]) -> str:
    from lab.emoji.packages import PACKAGES
    from lab.emoji.scenes import MODEL_STYLES

    used = [p for p in PACKAGES if p.style in {*MODEL_STYLES, *vq_seen}]
    rows = "\n".join(f"- `{p.name}` {p.version} ({NAMES[p.style]}): artwork {p.artwork_license}"
                     for p in used)
    credits = "\n".join(f"- {ATTRIBUTION[p.style]}" for p in used)
    return f"""# dimoo-emoji: license and attributions

The weights in this folder (the transformer, `model.safetensors`, and the VQ, `vqvae/`) were
trained by ComfyUI-LADR (`lab/emoji/`, training step {step:,}) on emoji pictures from these npm
packages, at these versions:

{rows}

The transformer was trained on {" and ".join(NAMES[s] for s in MODEL_STYLES)} pictures; the
VQ on {", ".join(NAMES[s] for s in vq_seen)} pictures. No Apple or Facebook emoji artwork
was used.

Attributions:
{credits}

The weights in this folder are licensed under CC BY-SA 4.0
(https://creativecommons.org/licenses/by-sa/4.0/), which is compatible with the licenses of
the artwork above. The rest of ComfyUI-LADR keeps its own license.
"""


NAMES = {"noto": "Noto Emoji", "twemoji": "Twemoji", "openmoji": "OpenMoji"}
ATTRIBUTION = {
    "noto": "Noto Emoji: Copyright Google Inc., Apache License 2.0 "
            "(https://www.apache.org/licenses/LICENSE-2.0), https://github.com/googlefonts/noto-emoji",
    "twemoji": "Twemoji: Copyright Twitter, Inc. and other contributors, graphics licensed "
               "under CC BY 4.0 (https://creativecommons.org/licenses/by/4.0/), "
               "https://github.com/twitter/twemoji",
    "openmoji": "OpenMoji: the open-source emoji and icon project, https://openmoji.org, "
                "licensed under CC BY-SA 4.0 (https://creativecommons.org/licenses/by-sa/4.0/)",
}


def calibration_prompts(n: int = CALIBRATION_PROMPTS) -> list[str]:
    """Validation-split captions (the prompts the guidance scale was tuned on; never test)."""
    from lab.emoji.verdicts import VAL_SEED, prompt_scenes

    return [sc.caption for sc in prompt_scenes(n, "validation", VAL_SEED)]


def finish(folder: Path, step: int, cfg: float, guidance: Path, vq_seen: list[str]) -> None:
    """fp16 weights, the tuned config, the prompt list and the license, in `folder`."""
    for name in WEIGHT_FILES:
        to_half(folder / name)
    config = json.loads((folder / "config.json").read_text())
    try:
        source = str(guidance.resolve().relative_to(ROOT))
    except ValueError:
        source = guidance.name
    config.update(default_cfg=cfg, ladr_can_edit=False, ladr_can_understand=False)
    config[TESTBED_KEY] = {"name": "emoji", "step": step, "default_cfg_from": source}
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (folder / "calibration_prompts.txt").write_text("\n".join(calibration_prompts()) + "\n")
    (folder / LICENSE_FILE).write_text(license_text(step, vq_seen))


def readable(folder: Path) -> None:
    """Files readable by all (the cache's VQ folder and temporary folders are private)."""
    for path in (folder, *folder.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)


PREVIEW_SEEDS, PREVIEW_STEPS = 2, 16


def preview_captions() -> list[str]:
    """Every emoji alone, then the validation captions (never a test prompt)."""
    from lab.emoji.scenes import Spec, caption_for
    from lab.emoji.vocab import VOCAB

    singles = [caption_for(Spec("single_object", (i,))) for i in range(len(VOCAB))]
    return singles + calibration_prompts()


def fit_preview(folder: Path, seeds: int = PREVIEW_SEEDS, steps: int = PREVIEW_STEPS) -> dict:
    """The fitted preview table of the folder's model (module docstring) into its vqvae/."""
    from ladr_core import load_dimoo
    from ladr_core.dimoo.model.vq import PREVIEW_TABLE_FILE, fit_preview_table, save_preview_table

    pipe = load_dimoo(folder, dtype=torch.float32)
    table, texts = pipe.preview_table(), preview_captions()
    runs = [pipe.generate(texts, steps=steps, seed=1000 * (s + 1), strategy="baseline")
            for s in range(seeds)]
    tokens, images = torch.cat([r.tokens for r in runs]), torch.cat([r.images for r in runs])
    table, counts = fit_preview_table(tokens, images, runs[0].grid, table)
    meta = {"images": str(len(tokens)), "codes_fitted": str(int((counts > 0).sum())),
            "command": f"python -m lab.emoji.ship (seeds {seeds}, steps {steps})"}
    save_preview_table(folder / "vqvae" / PREVIEW_TABLE_FILE, table, meta)
    return meta


def place(staged: Path, out: Path) -> None:
    """`staged` becomes `out` by renames (an old `out` is removed only after)."""
    old = None
    if out.exists():
        old = out.parent / f".{out.name}.old-{os.getpid()}"
        os.replace(out, old)
    os.replace(staged, out)
    if old is not None:
        shutil.rmtree(old)


def ship(checkpoint: Path, guidance: Path, out: Path, limit: int = MAX_WEIGHT_BYTES,
         source: Path | None = None, vq_styles: tuple[str, ...] = VQ_STYLES) -> dict:
    """The whole export (module docstring); returns what was written."""
    from lab.emoji.guidance import tuned_cfg
    from lab.emoji.train import export_checkpoint

    if not checkpoint.is_file() or not (checkpoint.parent / "codes.pt").is_file():
        raise SystemExit(f"error: --checkpoint {checkpoint} must be a training checkpoint with the "
                         "run's codes.pt beside it (runs/transformer_ckpt.pt of the emoji cache)")
    if not guidance.is_file():
        tuned_cfg(guidance, None)  # its own message and fix
    if not vq_styles or set(vq_styles) - set(NAMES):
        raise SystemExit(f"error: --vq-styles {','.join(vq_styles)}: name the styles the VQ was "
                         f"trained on, comma-separated, from {', '.join(NAMES)}")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{out.name}.tmp-", dir=out.parent) as tmp:
        staged = Path(tmp) / out.name
        info = export_checkpoint(checkpoint, staged, source)
        cfg = tuned_cfg(guidance, info["step"])
        finish(staged, info["step"], cfg, guidance, list(vq_styles))
        size = check_size(staged, limit)  # before the fit: a refused model costs no sampling
        fit_preview(staged)
        size = check_size(staged, limit)
        readable(staged)
        place(staged, out)
    return {"out": str(out), "step": info["step"], "default_cfg": cfg, "weight_bytes": size}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--checkpoint", required=True, type=Path,
                    help="the training checkpoint (runs/transformer_ckpt.pt, codes.pt beside it)")
    ap.add_argument("--guidance", required=True, type=Path,
                    help="lab.emoji.guidance's results for this checkpoint")
    ap.add_argument("--out", type=Path, default=None, help="default: ladr_core/assets/dimoo_emoji")
    ap.add_argument("--vq-styles", default=",".join(VQ_STYLES),
                    help="the styles the VQ was trained on (named in LICENSE.md)")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    styles = tuple(s.strip() for s in a.vq_styles.split(",") if s.strip())
    done = ship(a.checkpoint, a.guidance, a.out or default_out(), vq_styles=styles)
    print(f"shipped step {done['step']} (default_cfg {done['default_cfg']:g}, "
          f"{done['weight_bytes'] / 1e6:.2f} MB of weights) -> {done['out']}\nnow rebuild its "
          "template and preview: python -m lab.workflows.build_examples; python -m "
          "lab.workflows.thumbnails ladr_emoji_text_to_image", file=sys.stdout)
    return done


if __name__ == "__main__":
    main()
