"""Command line: ``python -m ladr_core.calibrate MODEL_FOLDER --prompts FILE --json OUT``.

Runs the calibration (package docstring: the reference at ``--steps`` T, default 64, the
candidates and the matched baselines, self-scored, judged with ``--margin``) and prints each
setting's NFE, token-forwards, wall time and self-score with paired 95 % intervals. Writes OUT
(JSON), OUT's .png (Pareto plot), the contact sheet (OUT's stem + .sheet.png) and
``ladr_calibration.json`` beside the checkpoint. Interrupted (Ctrl-C), it resumes from
``OUT.partial.json`` when run again with the same arguments.

Exit status: 0 done, 2 bad input (one line naming the file or option and the fix), 130
interrupted.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TextIO

__all__ = ["TextProgress", "main", "parse"]

DTYPES = ("auto", "bf16", "fp16", "fp32")
BUILT_IN_FOLDERS = {"nano": "nano_model_path", "emoji": "emoji_model_path"}
"""MODEL_FOLDER words naming a built-in checkpoint (-> the ladr_core.assets function giving its
folder), used when no folder of that name is in the working directory."""


def model_folder(name: str) -> str:
    """The checkpoint folder MODEL_FOLDER names: a built-in's (BUILT_IN_FOLDERS) or as given."""
    if name in BUILT_IN_FOLDERS and not Path(name).exists():
        from .. import assets

        return str(getattr(assets, BUILT_IN_FOLDERS[name])())
    return name


class TextProgress:
    """A plain-text progress bar: redrawn in place on a terminal, one line per 10 % otherwise."""

    def __init__(self, stream: TextIO = sys.stderr, width: int = 30) -> None:
        self.stream, self.width = stream, width
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.start = time.perf_counter()
        self._shown = -1.0
        self._last_decile = -1

    def __call__(self, fraction: float, message: str) -> None:
        fraction = max(self._shown, fraction)  # never moves backwards
        self._shown = fraction
        done = int(self.width * fraction)
        bar = "#" * done + "." * (self.width - done)
        line = (f"[{bar}] {100 * fraction:5.1f}% {time.perf_counter() - self.start:6.0f}s "
                f"{message}")
        if self.tty:
            self.stream.write("\r" + line[:119].ljust(119))
            if fraction >= 1.0:
                self.stream.write("\n")
        elif int(fraction * 10) != self._last_decile:
            self._last_decile = int(fraction * 10)
            self.stream.write(line + "\n")
        self.stream.flush()


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    from .prompts import BUILTIN_COUNT

    ap = argparse.ArgumentParser(prog="python -m ladr_core.calibrate", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_folder", help="checkpoint folder (official Lumina-DiMOO layout); "
                    "'nano' / 'emoji' = the built-in DiMOO-nano / DiMOO-emoji")
    ap.add_argument("--prompts", default=None,
                    help="text file, one prompt per line (default: the checkpoint's "
                    f"calibration_prompts.txt, else the {BUILTIN_COUNT} built-in prompts for "
                    "Lumina-DiMOO, as many as the default margin needs)")
    ap.add_argument("--json", default="ladr_calibration_report.json",
                    help="report to write (its .png: the Pareto plot)")
    ap.add_argument("--size", type=int, default=None,
                    help="image side in px (default: the checkpoint's default size)")
    ap.add_argument("--steps", type=int, default=64, help="official T (default 64)")
    ap.add_argument("--seeds", type=int, default=1, help="images per prompt (default 1)")
    ap.add_argument("--cfg", type=float, default=None,
                    help="guidance scale (default: the checkpoint's)")
    ap.add_argument("--device", default=None, help="cpu, cuda, cuda:1, mps (default: cuda "
                    "when available, else cpu)")
    ap.add_argument("--dtype", choices=DTYPES, default="auto",
                    help="compute dtype (auto: bf16 on a GPU, fp32 on a CPU)")
    from ..dimoo.weights.formats import load_choices

    ap.add_argument("--weight-dtype", choices=load_choices(), default="default",
                    help="store the block weights in fp8 (as the loader node's weight_dtype)")
    ap.add_argument("--batch", type=int, default=8, help="images per call (lower it if memory "
                    "runs out)")
    ap.add_argument("--budget-minutes", type=float, default=None,
                    help="stop starting new settings when they would not finish in time")
    ap.add_argument("--calibration-file", default=None,
                    help="where to write the checkpoint's calibration (default: "
                    "MODEL_FOLDER/ladr_calibration.json)")
    ap.add_argument("--restart", action="store_true", help="ignore a stored partial run")
    ap.add_argument("--margin", default=None,
                    help="non-inferiority margin in self-score units: a setting qualifies when "
                    "the lower end of its 95 %% interval against the reference is above -margin "
                    "(default: the value fitted on DiMOO-nano, see the report's 'margin')")
    return ap.parse_args(argv)


def _device_and_dtype(device: str | None, dtype: str) -> tuple[str, object]:
    import torch

    dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if dtype == "auto":
        return dev, torch.float32 if dev == "cpu" else torch.bfloat16
    return dev, {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype]


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit status (module docstring)."""
    from ..dimoo import CheckpointError
    from ..errors import InputError
    from .api import calibrate, default_prompts, read_prompts
    from .margin import DEFAULT_MARGIN, check_margin, shortfall_message
    from .state import CalibrationError, fingerprint

    a = parse(argv)
    a.model_folder = model_folder(a.model_folder)
    try:
        margin = None if a.margin is None else check_margin(_number(a.margin))
        prompts = read_prompts(a.prompts) if a.prompts is not None else None
        fingerprint(a.model_folder)  # a folder without weights fails before any loading
        short = shortfall_message(len(prompts or default_prompts(a.model_folder)[0]), a.seeds,
                                  DEFAULT_MARGIN if margin is None else margin)
        if short:  # the run goes ahead; the report repeats it
            print(f"warning: {short}", file=sys.stderr)
        from ..dimoo import load_dimoo

        device, dtype = _device_and_dtype(a.device, a.dtype)
        weight_dtype = None if a.weight_dtype == "default" else a.weight_dtype
        pipe = load_dimoo(a.model_folder, device=device, dtype=dtype, weight_dtype=weight_dtype)
        report = calibrate(pipe, a.model_folder, a.json, prompts, seeds=a.seeds, size=a.size,
                           steps=a.steps, cfg=a.cfg, batch=a.batch,
                           budget_minutes=a.budget_minutes, weight_dtype=weight_dtype,
                           calibration_file=a.calibration_file, restart=a.restart,
                           progress=TextProgress(), prompt_source=a.prompts or "default",
                           margin=margin)
    except InputError as exc:  # an argument: named by its flag
        print(f"error: --{exc.name.replace('_', '-')} {exc.problem}; {exc.fix}", file=sys.stderr)
        return 2
    except (CalibrationError, CheckpointError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:  # the pipeline's own input checks (size, cfg, seeds)
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\ninterrupted: finished chunks are kept in {Path(a.json).name}.partial.json; "
              "run the same command again to resume", file=sys.stderr)
        return 130
    print(report["text"], end="")
    print(f"wrote {a.json}, {report['plot']}"
          + (f", {report['sheet']}" if report.get("sheet") else "")
          + (f", {report['calibration_file']}" if report.get("calibration_file") else ""))
    if report.get("calibration_file_error"):
        print(f"warning: {report['calibration_file_error']}", file=sys.stderr)
    if report.get("sheet_error"):
        print(f"warning: {report['sheet_error']}", file=sys.stderr)
    return 0


def _number(text: str) -> float | str:
    """``text`` as a float, else unchanged (check_margin then names it)."""
    try:
        return float(text)
    except ValueError:
        return text
