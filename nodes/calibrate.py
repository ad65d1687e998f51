"""LADR Calibrate node: the cheapest setting on the connected checkpoint that keeps quality by
the model's own self-score (ladr_core.calibrate), as a policy (web/docs/LADR_Calibrate/en.md).

A node of its own, not a preset on LADR Policy: a calibration belongs to a checkpoint (keyed to
the weights' fingerprint), the policy node has no model input, and a run takes minutes. Files
go beside the checkpoint, or under the system's temporary folder when that is read-only.
"""

from __future__ import annotations

import os
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import torch

from ladr_core import InputError
from ladr_core.calibrate import (
    BUILTIN_COUNT,
    CALIBRATION_FILE,
    CalibrationError,
    calibrate,
    calibrated_strategy,
    default_prompts,
    fingerprint,
)
from ladr_core.dimoo import size_error

from . import host, register_node, threads
from .handles import MODEL_TYPE, POLICY_TYPE, DiMOOModel
from .validate import input_error, node_error

io, _ = host.v3()

NODE = "LADR Calibrate"
MODES = ["load or run", "run", "load"]
PROGRESS_TOTAL = 1000


def checkpoint_folder(model: DiMOOModel) -> Path:
    """The folder the connected model was loaded from (ValueError when it has none)."""
    folder = getattr(model.pipe, "source_folder", None)
    if folder is None:
        raise input_error(NODE, "model", "was not loaded from a checkpoint folder",
                          "connect Load DiMOO Model")
    return Path(folder)


def calibration_path(folder: Path) -> Path:
    """`<folder>/ladr_calibration.json`, or a temporary-folder twin when it is read-only."""
    if os.access(folder, os.W_OK):
        return folder / CALIBRATION_FILE
    key = fingerprint(folder)[:16]
    return Path(tempfile.gettempdir()) / "ladr_calibration" / f"{key}.json"


def _matches(report: dict[str, Any], wanted: dict[str, Any]) -> bool:
    got = report.get("conditions") or {}
    return all(got.get(k) == v for k, v in wanted.items())


def image_tensor(pil: Any) -> torch.Tensor:
    """PIL RGB -> IMAGE [1, H, W, 3] float32 in [0, 1]."""
    import numpy as np

    return torch.from_numpy(np.asarray(pil.convert("RGB"), dtype=np.float32) / 255.0)[None]


def check_size(model: DiMOOModel, prompts: list[str], size: int) -> None:
    """``size`` (0 = default) on the model's grid and within its context, before anything runs."""
    if size == 0:
        return
    pipe = model.pipe
    f = pipe.vq_factor
    err = size_error("size", size, f)
    if err is not None:  # err.fix: "nearest valid size: 48 or 52"
        raise input_error(NODE, "size", f"is {size} px, not a multiple of {f} px (one token "
                          f"per {f} x {f} px on this checkpoint)", f"use {err.fix.split(': ')[-1]}")
    try:
        pipe.prepare_text(prompts, width=size, height=size)
    except InputError as exc:
        raise node_error(NODE, exc, {"width and height": "size"},
                         {"size": "use a smaller size (0 = the checkpoint's default)"}) from None


def load_or_run(model: DiMOOModel, mode: str, prompts: str, seeds: int, size: int, steps: int,
                budget_minutes: float, batch: int) -> tuple[Any, Any, str, Any]:
    """(strategy, plot IMAGE, report text, contact sheet IMAGE) for the node."""
    if mode not in MODES:
        raise input_error(NODE, "mode", f"is {mode!r}", f"use one of {MODES}")
    folder = checkpoint_folder(model)
    path = calibration_path(folder)
    # one prompt a line; empty: the checkpoint's list, else the built-in one
    texts = [p.strip() for p in prompts.splitlines() if p.strip()] or default_prompts(folder)[0]
    check_size(model, texts, size)
    wanted = {"prompt_texts": texts, "seeds": seeds, "size": size or model.pipe.default_size,
              "steps": steps}  # the conditions a stored calibration must have to be reused
    note = ""
    if mode != "run":
        try:
            strategy, _, report = calibrated_strategy(folder, path)
            fresh = _matches(report, wanted) and not report.get("rejudged")
            if fresh or mode == "load":
                return (strategy, _plot(report), _text(report, "loaded " + str(path)),
                        _sheet(report))
            note = ("the stored calibration was judged by an older rule: ran again\n"
                    if _matches(report, wanted) else
                    "the stored calibration was made with other prompts/size/steps: ran again\n")
        except CalibrationError as exc:
            if mode == "load":
                raise input_error(NODE, "mode", "is 'load', but no calibration of these weights "
                                  f"can be loaded ({exc})", "set mode to 'load or run' to "
                                  "calibrate now and save it") from None
            note = f"{exc}\n-> calibrated again\n" if path.exists() else ""
    report = _run(model, folder, path, wanted, budget_minutes, batch)
    strategy, _, report = calibrated_strategy(folder, path)
    return strategy, _plot(report), note + _text(report, "wrote " + str(path)), _sheet(report)


def _run(model: DiMOOModel, folder: Path, path: Path, wanted: dict[str, Any],
         budget_minutes: float, batch: int) -> dict[str, Any]:
    size = wanted["size"] if wanted["size"] != model.pipe.default_size else None
    job = model.pipe.prepare_text(wanted["prompt_texts"], width=size, height=size)
    host.load_to_device(model.patcher, model.pipe.run_memory(job, batch))
    bar = host.Progress.start(PROGRESS_TOTAL)
    shown = [0]

    def progress(fraction: float, _message: str) -> None:
        value = max(shown[0], round(PROGRESS_TOTAL * fraction))
        if value != shown[0]:
            shown[0] = value
            bar.update(value)

    weights = model.key[4] if len(model.key) > 4 else None
    try:
        with threads.torch_threads():
            return calibrate(model.pipe, folder, path, wanted["prompt_texts"],
                             seeds=wanted["seeds"], size=size, steps=wanted["steps"],
                             batch=batch, budget_minutes=budget_minutes or None,
                             weight_dtype=weights, calibration_file=path, progress=progress,
                             check=host.check_interrupt, prompt_source="node")
    except InputError as exc:  # a widget's value (budget_minutes)
        raise node_error(NODE, exc) from None
    except CalibrationError as exc:
        raise ValueError(f"{NODE}: {exc}") from None


def _plot(report: dict[str, Any]) -> torch.Tensor:
    from ladr_core.calibrate import plot_report

    return image_tensor(plot_report(report))


def _sheet(report: dict[str, Any]) -> torch.Tensor:
    """The report's contact sheet as IMAGE, or a card saying why there is none."""
    from PIL import Image, ImageDraw

    path = report.get("sheet")
    if report.get("rejudged"):  # its sheet marks the recommendation of the older rule
        path = None
    if path and Path(path).is_file():
        with Image.open(path) as pic:
            return image_tensor(pic)
    why = report.get("sheet_error") or (
        "this calibration was saved under an older rule and judged again; its sheet marks "
        "the old recommendation" if report.get("rejudged") else
        f"the contact sheet {path} is missing" if path else
        "this calibration was saved without a contact sheet")
    card = Image.new("RGB", (720, 96), "white")
    d = ImageDraw.Draw(card)
    for k, line in enumerate(textwrap.wrap(f"No contact sheet: {why}.", 110)[:4]
                             + ["Set mode to 'run' to calibrate again and draw it."]):
        d.text((8, 8 + 16 * k), line, fill="black")
    return image_tensor(card)


def _text(report: dict[str, Any], where: str) -> str:
    from ladr_core.calibrate import report_text

    rec = next(c for c in report["candidates"] if c["name"] == report["recommended"])
    kind, steps = rec["strategy"]["kind"], rec["strategy"]["steps"]
    hint = (f"\nThe recommendation ran at {steps} steps: set the sampler's steps to {steps}."
            if kind == "ladr" else
            f"\nThe recommendation is the official sampler at {steps} steps: set DiMOO Sampling "
            f"Rule's strategy to 'baseline' and the sampler's steps to {steps} to use it."
            if kind == "baseline" else
            f"\nThe recommendation is strategy {kind!r} at {steps} steps: set DiMOO Sampling "
            f"Rule's strategy to {kind!r} and the sampler's steps to {steps} to use it.")
    return report_text(report) + hint + f"\n({where})"


@register_node(menu=120)
class LADRCalibrate(io.ComfyNode):
    """Calibrate LADR on the connected checkpoint and output the recommended policy."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="LADR_Calibrate",
            display_name="LADR Calibrate",
            category="LADR",
            search_aliases=["calibrate", "self-score", "which preset", "ladr calibration"],
            description="Measures the LADR presets against the official sampler on this "
            "checkpoint (the model scores its own images) and outputs the cheapest setting "
            "shown to be within a small margin of 64 steps, with a contact sheet of the same "
            "prompts under each: judge the sheet, not the number alone. Takes minutes; the "
            "result is saved beside the checkpoint and reused.",
            inputs=_inputs(),
            outputs=[
                io.Custom(POLICY_TYPE).Output("policy", tooltip="The recommended strategy with "
                                              "its T, for DiMOO Sampling Rule's policy input."),
                io.Image.Output("report_image", tooltip="Pareto plot: self-score difference "
                                "to 64 steps (95 % CI) against forwards per image."),
                io.String.Output("report", tooltip="Every setting's NFE, forwards, time and "
                                 "self-score with paired intervals; the recommendation."),
                io.Image.Output("sheet", tooltip="A/B contact sheet: the same prompts and "
                                "seeds under the reference, the recommendation and the next "
                                "cheaper settings, enlarged. The verdict is yours: the "
                                "self-score misses some losses the eye sees."),
            ],
        )

    @classmethod
    def execute(cls, model: DiMOOModel, mode: str, prompts: str, seeds: int, size: int,
                steps: int, budget_minutes: float, batch: int) -> io.NodeOutput:
        strategy, image, text, sheet = load_or_run(model, mode, prompts, seeds, size, steps,
                                                   budget_minutes, batch)
        return io.NodeOutput(strategy, image, text, sheet)


def _inputs() -> list:
    return [
        io.Custom(MODEL_TYPE).Input("model", tooltip="From Load DiMOO Model: the checkpoint "
                                    "(and weight dtype) to calibrate."),
        io.Combo.Input("mode", options=MODES, default="load or run",
                       tooltip="load or run: reuse the checkpoint's saved calibration when it "
                       "was made for these weights and these inputs, else run one. run: always "
                       "run again. load: only load (error if there is none)."),
        io.String.Input("prompts", multiline=True, default="",
                        tooltip="One prompt per line, like the images you make. Empty: the "
                        "checkpoint's calibration_prompts.txt, else the built-in list "
                        f"({BUILTIN_COUNT} prompts, as many as the default margin needs)."),
        io.Int.Input("seeds", default=1, min=1, max=16,
                     tooltip="Images per prompt; more narrows the intervals (and takes longer)."),
        io.Int.Input("size", default=0, min=0, max=2048, step=16,
                     tooltip="Image side in px (multiple of 16); 0 = the checkpoint's default. "
                     "512 calibrates the 8B model about 4x faster than 1024."),
        io.Int.Input("steps", default=64, min=1, max=1000,
                     tooltip="The official schedule length T every setting is compared with "
                     "(Lumina-DiMOO: 64)."),
        io.Float.Input("budget_minutes", default=0.0, min=0.0, max=1440.0, step=1.0,
                       tooltip="Stop starting new settings when they would not finish in time; "
                       "0 = no limit. Too small for one setting: an error says how much is "
                       "needed."),
        io.Int.Input("batch", default=8, min=1, max=64,
                     tooltip="Images per forward pass; lower it if memory runs out."),
    ]
