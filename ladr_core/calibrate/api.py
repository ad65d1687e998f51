"""``calibrate()``: measure LADR against the official sampler on the model you run, and keep the
verdict beside the checkpoint; ``calibrated_strategy()``: read it back for those weights.

Files written by a finished calibration (all atomically, state.py):

    OUT                         the report (JSON): `candidates` (name, nfe, token_forwards,
                                wall_s, self_score, paired intervals), `recommended`, the rule,
                                the conditions and the checkpoint's fingerprint;
    OUT with suffix .png        the Pareto plot (report.py);
    OUT's stem + .sheet.png     the A/B contact sheet (sheet.py): the same prompts and seeds under
                                the reference, the recommendation and the next cheaper settings;
                                the report names it in `sheet` (None and `sheet_error` saying
                                why when it could not be written; the report is written anyway);
    <checkpoint>/ladr_calibration.json   the same report, keyed to the checkpoint's fingerprint
                                (`calibration_file` overrides the place; a read-only folder is
                                reported in `calibration_file_error`, the run still succeeds).

While it runs, `OUT.partial.json` holds the finished chunks; it is removed at the end.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from .candidates import Candidate, strategy_from_spec
from .margin import DEFAULT_MARGIN, check_margin
from .prompts import BUILTIN_PROMPTS
from .report import build_report, plot_report, rejudge, report_text
from .runner import CALIBRATION_SELF_SCORE, Calibration, CalibrationConfig, Progress
from .sheet import draw_sheet, sheet_columns, sheet_items
from .state import (
    CALIBRATION_FILE,
    FORMAT,
    CalibrationError,
    CalibrationInputError,
    fingerprint,
    load_calibration,
    partial_path,
    write_json_atomic,
)

__all__ = ["calibrate", "calibrated_strategy", "default_prompts",
           "read_prompts", "sheet_path"]

CHECKPOINT_PROMPTS = "calibration_prompts.txt"
"""A checkpoint folder may ship its own prompt list (the built-in DiMOO-nano does)."""


def read_prompts(path: str | Path) -> list[str]:
    """One prompt per non-empty line (surrounding spaces stripped); CalibrationError naming the
    file when it is missing, unreadable or holds no prompt."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CalibrationError(f"--prompts {p}: file not found; give a text file with one prompt "
                               "per line, or leave --prompts out for the built-in list") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CalibrationError(f"--prompts {p}: cannot read it ({exc}); give a UTF-8 text file "
                               "with one prompt per line") from None
    prompts = [line.strip() for line in text.splitlines() if line.strip()]
    if not prompts:
        raise CalibrationError(f"--prompts {p}: the file holds no prompt; write one prompt per "
                               "line (like the images you make)")
    return prompts


def default_prompts(folder: str | Path) -> tuple[list[str], str]:
    """(prompts, where from): the checkpoint's own calibration_prompts.txt, else the built-in
    list for Lumina-DiMOO."""
    own = Path(folder) / CHECKPOINT_PROMPTS
    if own.is_file():
        return read_prompts(own), str(own)
    return list(BUILTIN_PROMPTS), "built-in (ladr_core.calibrate.prompts)"


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _stored_kinds(transformer: torch.nn.Module) -> list[str]:
    """How the transformer's weights are stored, one name per kind (``GGUF Q8_0``, ``ComfyUI
    float8_e4m3fn``, else the weight's dtype)."""
    kinds: set[str] = set()
    for module in transformer.modules():
        weight = getattr(module, "weight", None)
        if not isinstance(weight, torch.Tensor):
            continue
        ggml_type = getattr(module, "ggml_type", None)
        quant_format = getattr(module, "quant_format", None)
        kinds.add(f"GGUF {ggml_type}" if isinstance(ggml_type, str) and weight.dtype == torch.uint8
                  else f"ComfyUI {quant_format}" if isinstance(quant_format, str)
                  else _dtype_name(weight.dtype))
    return sorted(kinds)


def _weights_desc(pipe: Any, weight_dtype: str | None) -> str:
    """The weights a calibration measured, in its report and its resume key: the compute dtype
    and how the weights are stored (a GGUF file's bytes are not a dtype), and the load's
    ``weight_dtype``."""
    compute = getattr(pipe, "compute_dtype", None)
    if compute is None:
        compute = next(p.dtype for p in pipe.transformer.parameters() if p.is_floating_point())
    stored = " + ".join(_stored_kinds(pipe.transformer))
    return f"computed in {_dtype_name(compute)}; stored {stored}; weight_dtype {weight_dtype or 'default'}"


def calibrate(pipe: Any, folder: str | Path, out: str | Path,
              prompts: Sequence[str] | None = None, *, seeds: int = 1, size: int | None = None,
              steps: int = 64, cfg: float | None = None, batch: int = 8,
              budget_minutes: float | None = None, weight_dtype: str | None = None,
              calibration_file: str | Path | None = None, restart: bool = False,
              progress: Progress | None = None, check: Callable[[], None] | None = None,
              prompt_source: str = "given",
              candidates: list[Candidate] | None = None,
              margin: float | None = None) -> dict[str, Any]:
    """Calibrate ``pipe`` (loaded from ``folder``), write the files and return the report
    (package docstring). ``progress`` and ``check`` are called at every sampler step (an
    interrupt propagates; the partial state stays for a resume; ``restart`` ignores it).
    ``candidates``: default ``default_candidates(steps)``, the first the reference. Too few
    prompts for ``margin`` are run anyway and reported in ``warnings``.
    """
    margin = DEFAULT_MARGIN if margin is None else check_margin(margin)
    fp = fingerprint(folder)
    if prompts is None:
        prompts, prompt_source = default_prompts(folder)
    budget = None if budget_minutes is None else float(budget_minutes) * 60.0
    if budget is not None and not budget > 0:
        raise CalibrationInputError("budget_minutes", f"is {budget_minutes!r}",
                                    "give a positive number of minutes, or no budget")
    config = CalibrationConfig(tuple(prompts), seeds, size, steps, cfg, batch, budget,
                               CALIBRATION_SELF_SCORE)
    out = Path(out)
    state = partial_path(out)
    if restart:
        state.unlink(missing_ok=True)
    start = time.perf_counter()
    cal = Calibration(pipe, config, state, config.key(fp, _weights_desc(pipe, weight_dtype)),
                      progress, check, candidates)
    runs = cal.run()
    # the prompt-shortfall warning comes only with the reference recommended (report.judge)
    report = build_report(runs, config.groups, next(iter(runs)), margin)
    report = {"format": FORMAT, **report, "skipped": cal.skipped,
              "checkpoint": {"folder": str(Path(folder).resolve()), "fingerprint": fp},
              "conditions": {"prompts": len(config.prompts), "prompt_texts": list(prompts),
                             "seeds": seeds,
                             "images": len(config.items), "prompt_source": prompt_source,
                             "size": size or pipe.default_size, "steps": steps,
                             "cfg": pipe.default_cfg if cfg is None else cfg,
                             "weights": _weights_desc(pipe, weight_dtype),
                             "device": str(pipe.device), "self_score": repr(config.self_score),
                             "self_score_passes_per_image": config.self_score.passes,
                             "margin": margin},
              "seconds": time.perf_counter() - start, "resumed_chunks": cal.resumed,
              "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    _write_sheet(report, runs, pipe, config, out)
    _write_outputs(report, out, Path(folder), calibration_file)
    state.unlink(missing_ok=True)
    return report


def _save_png(image: Any, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp.png")
    try:
        image.save(tmp)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def sheet_path(out: str | Path) -> Path:
    """Where the contact sheet of a report written to ``out`` goes: OUT's stem + .sheet.png."""
    out = Path(out)
    return out.with_name(out.stem + ".sheet.png")


def _write_sheet(report: dict[str, Any], runs: dict[str, dict[str, Any]], pipe: Any,
                 config: CalibrationConfig, out: Path) -> None:
    """Decode the sheet's items and write the sheet; sets ``sheet`` (its path) or, when it
    cannot be made, ``sheet`` None and ``sheet_error`` (the reason)."""
    path = sheet_path(out)
    items = sheet_items(len(config.prompts), config.seeds)
    size = config.size or pipe.default_size
    grid = (size // pipe.vq_factor, size // pipe.vq_factor)
    report["sheet"], report["sheet_columns"] = None, sheet_columns(report)
    try:
        images: dict[str, list[Any]] = {}
        for name in report["sheet_columns"]:
            stored = runs[name]["sheet_tokens"]
            have = [i for i in items if i in stored]
            decoded = {}
            if have:
                codes = torch.tensor([stored[i] for i in have], dtype=torch.long)
                pics = (pipe.decode(codes, grid).float().clamp(0, 1) * 255).round()
                decoded = dict(zip(have, pics.to(torch.uint8).cpu().numpy(), strict=True))
            images[name] = [decoded.get(i) for i in items]
        _save_png(draw_sheet(report, images, [config.items[i] for i in items]), path)
    except (OSError, RuntimeError, ValueError) as exc:
        report["sheet_error"] = (f"could not write the contact sheet {path} ({exc}); the "
                                 "report is complete without it. Make that folder writable "
                                 "(or free space) and run again, or give --json elsewhere")
        return
    report["sheet"] = str(path)


def _write_outputs(report: dict[str, Any], out: Path, folder: Path,
                   calibration_file: str | Path | None) -> None:
    """The plot, OUT and the checkpoint's calibration file (each atomic)."""
    png = out.with_suffix(".png")
    _save_png(plot_report(report), png)
    report["plot"] = str(png)
    report["text"] = report_text(report)
    beside = Path(calibration_file) if calibration_file else folder / CALIBRATION_FILE
    report["calibration_file"] = str(beside)
    if beside.resolve() != out.resolve():
        try:
            write_json_atomic(beside, report)
        except OSError as exc:
            report["calibration_file"] = None
            report["calibration_file_error"] = (f"could not write {beside} ({exc}); copy {out} "
                                                "there to use it as this checkpoint's calibration")
    write_json_atomic(out, report)


def calibrated_strategy(folder: str | Path, calibration_file: str | Path | None = None
                        ) -> tuple[Any, int, dict[str, Any]]:
    """(strategy object, its T, the report) of the recommended setting for the checkpoint in
    ``folder``; CalibrationError (``load_calibration``) when the file cannot serve. An old
    file is judged by the current rule (``report.rejudge``; ``rejudged`` is set)."""
    path = Path(calibration_file) if calibration_file else Path(folder) / CALIBRATION_FILE
    data = load_calibration(path, fingerprint(folder))
    try:
        data = rejudge(data)
    except (KeyError, TypeError, ValueError, StopIteration) as exc:
        raise CalibrationError(f"{path}: saved before the current rule and missing what it "
                               f"needs to be judged again ({exc!r}); delete the file and "
                               "calibrate again") from None
    entry = next(c for c in data["candidates"] if c["name"] == data["recommended"])
    try:
        strategy, steps = strategy_from_spec(entry.get("strategy"),
                                             f"candidates[{data['recommended']!r}].strategy")
    except ValueError as exc:
        raise CalibrationError(f"{path}: field {exc}; delete the file and calibrate again") \
            from None
    return strategy, steps, data
