"""The A/B contact sheet of a calibration: the same prompts and seeds under the reference, the
recommended setting and the next cheaper ones, side by side, for a person to judge (why the sheet
and not the self-score is the verdict: web/docs/LADR_Calibrate/en.md, docs/reports/CALIBRATION.md).

One row per prompt (the first ``SHEET_PROMPTS``, first seed), one column per setting
(``sheet_columns``) headed by its name, forwards per image and self-score difference with the
interval the rule reads; cells enlarged (nearest) or reduced to ``MAX_CELL``. The runner keeps
these items' final tokens (``sheet_items``); ``draw_sheet`` lays them out with PIL.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .report import decision_interval

__all__ = ["MAX_CELL", "MIN_CELL", "NEXT_CHEAPER", "SHEET_PROMPTS", "cell_size", "draw_sheet",
           "sheet_columns", "sheet_items"]

SHEET_PROMPTS = 6
NEXT_CHEAPER = 3
MIN_CELL = 240  # px: a 48 px image is shown 5x
MAX_CELL = 512
_LABEL_W = 220
_HEAD_H = 64
_PAD = 6
_TITLE_H = 34


def sheet_items(prompts: int, seeds: int) -> list[int]:
    """Item indices on the sheet: the first seed of each of the first ``SHEET_PROMPTS``
    prompts (items are prompt-major, ``seeds`` per prompt)."""
    return [p * seeds for p in range(min(SHEET_PROMPTS, prompts))]


def sheet_columns(report: Mapping[str, Any], next_cheaper: int = NEXT_CHEAPER) -> list[str]:
    """The reference, the recommendation (when it is another setting) and the
    ``next_cheaper`` settings just below the recommendation in token-forwards per image."""
    cands = report["candidates"]
    rec = next(c for c in cands if c["name"] == report["recommended"])
    names = [report["reference"]] + ([rec["name"]] if rec["name"] != report["reference"] else [])
    below = sorted((c for c in cands if c["token_forwards"] < rec["token_forwards"]),
                   key=lambda c: (-c["token_forwards"], c["name"]))
    return names + [c["name"] for c in below[:next_cheaper]]


def cell_size(side: int) -> int:
    """Shown side of a ``side`` px image: an integer multiple reaching ``MIN_CELL`` for small
    images, ``side`` itself up to ``MAX_CELL``, else ``MAX_CELL``."""
    if side >= MIN_CELL:
        return min(side, MAX_CELL)
    return side * math.ceil(MIN_CELL / side)


def _header(c: Mapping[str, Any], report: Mapping[str, Any]) -> list[str]:
    role = ("reference" if c["name"] == report["reference"] else
            "RECOMMENDED" if c["name"] == report["recommended"] else "cheaper")
    ci = decision_interval(c) if c.get("noninferiority_lo") is not None else c.get(
        "vs_reference")
    diff = ("self-score: reference" if ci is None else
            f"{ci['diff']:+.3f} [{ci['lo']:+.3f}, {ci['hi']:+.3f}]")
    return [f"{c['name']} ({role})", f"{c['nfe']:.1f} forwards/image", diff]


def draw_sheet(report: Mapping[str, Any], images: Mapping[str, Sequence[np.ndarray | None]],
               prompts: Sequence[str]) -> Any:
    """PIL image of the sheet: ``images[name][r]`` uint8 [H, W, 3] of row r under setting
    ``name`` (None: an empty cell), columns in ``images``' order."""
    from PIL import Image, ImageDraw

    names = list(images)
    side = next((im.shape[0] for col in images.values() for im in col if im is not None), 48)
    cell = cell_size(side)
    rows = len(prompts)
    width = _LABEL_W + len(names) * (cell + _PAD) + _PAD
    height = _TITLE_H + _HEAD_H + rows * (cell + _PAD) + _PAD
    sheet = Image.new("RGB", (width, height), "white")
    d = ImageDraw.Draw(sheet)
    d.text((_PAD, 4), "Same prompts and seeds in every row. Judge the images: the sheet, not "
           "the self-score alone, is the verdict.", fill="black")
    d.text((_PAD, 18), f"margin {report['margin']['value']:g}; recommended: "
           f"{report['recommended']}", fill="black")
    by_name = {c["name"]: c for c in report["candidates"]}
    for j, name in enumerate(names):
        x = _LABEL_W + _PAD + j * (cell + _PAD)
        color = (214, 39, 40) if name == report["recommended"] else "black"
        for k, line in enumerate(_header(by_name[name], report)):
            d.text((x, _TITLE_H + 4 + 16 * k), line, fill=color)
        for r in range(rows):
            y = _TITLE_H + _HEAD_H + r * (cell + _PAD)
            im = images[name][r] if r < len(images[name]) else None
            if im is None:
                d.rectangle([x, y, x + cell - 1, y + cell - 1], outline=(180, 180, 180))
                d.text((x + 8, y + cell // 2), "not stored", fill=(120, 120, 120))
                continue
            pic = Image.fromarray(np.ascontiguousarray(im), "RGB")
            resample = Image.Resampling.NEAREST if cell >= side else Image.Resampling.LANCZOS
            sheet.paste(pic.resize((cell, cell), resample), (x, y))
    for r, prompt in enumerate(prompts):
        y = _TITLE_H + _HEAD_H + r * (cell + _PAD)
        for k, line in enumerate(textwrap.wrap(prompt, 32)[: max(1, cell // 16)]):
            d.text((_PAD, y + 4 + 16 * k), line, fill="black")
    return sheet
