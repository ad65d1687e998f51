"""GenEval-style automatic scoring of generated scenes (colour segmentation + components).

GenEval (Ghosh et al., 2023) detects objects and checks the prompt's objects, counts, colours and
positions. Our scenes are flat-coloured shapes, so detection is exact image analysis:
  1. every pixel is assigned to the nearest palette colour (or the background), pixels far from
     all of them are ignored (VQ blur between colours);
  2. 8-connected components per colour; components smaller than `MIN_AREA` are noise;
  3. shape: the circle / square / apex-up triangle template, inscribed in the component's
     bounding box, that the component fits within one pixel; a component that fits none, or
     whose box is not about square, is a misshapen "blob" that matches nothing
     (`classify_shape`; the previous rule called every non-square, non-triangle blob a circle).
A spec passes when the detected objects match its objects one to one (shape, and colour where
the caption names one) with nothing extra, and, for position, the relation holds on centres
(laxer than the generator: offset >= `RELATION_EVAL_PX`, axis dominant). Score per category =
fraction passed; overall = mean over categories (GenEval's overall).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from lab.nano.scenes import BACKGROUND, CATEGORIES, COLORS, Spec, relation_holds

MIN_AREA = 20              # px at 64x64 (smallest shape: triangle of side 12 ~ 72 px)
MAX_COLOR_DIST = 80.0      # RGB distance beyond which a pixel belongs to no palette colour
RELATION_EVAL_PX = 4.0
MAX_MISFIT = 0.1            # well-formed shape: at most this share of its eroded template left
                            # empty, and of the box outside its dilated template filled
MAX_ASPECT_PX, MAX_ASPECT_FRAC = 1, 0.15   # |box height - box width| allowed


@dataclass(frozen=True)
class Detection:
    shape: str
    color: str
    cx: float
    cy: float
    area: int


def _label_components(mask: np.ndarray) -> list[np.ndarray]:
    """8-connected components of a bool [H, W] mask, each as an int array [n, 2] of (y, x)."""
    seen = np.zeros_like(mask, dtype=bool)
    h, w = mask.shape
    comps = []
    for y0, x0 in zip(*np.nonzero(mask), strict=True):
        if seen[y0, x0]:
            continue
        stack, pts = [(y0, x0)], []
        seen[y0, x0] = True
        while stack:
            y, x = stack.pop()
            pts.append((y, x))
            for dy, dx in itertools.product((-1, 0, 1), repeat=2):
                ny, nx = y + dy, x + dx
                if 0 <= ny < h and 0 <= nx < w and mask[ny, nx] and not seen[ny, nx]:
                    seen[ny, nx] = True
                    stack.append((ny, nx))
        comps.append(np.array(pts))
    return comps


def shape_templates(hgt: int, wid: int) -> dict[str, np.ndarray]:
    """Bool [hgt, wid] masks of each shape inscribed in a bounding box (same geometry as
    `scenes.shape_mask`: inscribed ellipse, full box, apex-up triangle)."""
    ys, xs = np.mgrid[0:hgt, 0:wid] + 0.5
    u, v = xs / wid - 0.5, ys / hgt  # u in [-0.5, 0.5] across, v in [0, 1] downwards
    return {"circle": u ** 2 + (v - 0.5) ** 2 <= 0.25 + 1e-9,
            "square": np.ones((hgt, wid), dtype=bool),
            "triangle": np.abs(u) <= v / 2 + 1e-9}


def _grow(mask: np.ndarray) -> np.ndarray:
    """Binary dilation of a bool [h, w] mask by the 3 x 3 square (outside the box counts as 0)."""
    pad = np.pad(mask, 1)
    h, w = mask.shape
    return np.any([pad[dy:dy + h, dx:dx + w] for dy in range(3) for dx in range(3)], axis=0)


def _shrink(mask: np.ndarray) -> np.ndarray:
    """Binary erosion by the 3 x 3 square, the box border counting as inside (so a full box
    stays full): a template edge on the box side is not eroded away."""
    return ~_grow(~mask)


def shape_fit(comp: np.ndarray, template: np.ndarray) -> tuple[float, float]:
    """How far a component [h, w] (bool, its bounding box) is from a template of the same box,
    with one pixel of slack for rasterisation and VQ blur: (missing, extra) =
    (share of the template eroded by 1 px that the component leaves empty,
     share of the box outside the template dilated by 1 px that the component fills; 0 when
     the dilated template covers the box, as a square's does).
    A circle's outside is its box's four corners, so a square, or a square with one corner
    notched, fills most of it; a triangle's is the two top corners."""
    core, halo = _shrink(template), _grow(template)
    missing = float((core & ~comp).sum()) / max(1, int(core.sum()))
    extra = float((comp & ~halo).sum()) / max(1, int((~halo).sum()))
    return missing, extra


def classify_shape(pts: np.ndarray) -> str:
    """Shape of one component [n, 2] of (y, x): "circle", "square", "triangle", or "blob" when
    it is not a well-formed shape (a blob never matches a spec).

    The shape is the template (inscribed in the component's bounding box) the component fits
    best within one pixel of slack (`shape_fit`, misfit = the larger of its two shares; ties go
    to the higher IoU); a misfit above `MAX_MISFIT`, or a box that is not about square (every
    rendered shape's is), makes it a blob. Validated (lab/tests/nano/test_testbed_evaluator.py,
    docs/reports/QUALITY.md): rendered shapes from 11 px at integer and quarter-pixel centres pass;
    ground-truth test scenes sent through the nano VQ (encode, quantise, decode) misfit by at
    most 0.08 (879 components, rounded square corners the worst); bitten, notched, hollow, cut
    or L-shaped blobs misfit by 0.14 or more, stretched, merged or truncated ones fail the box.
    """
    y0, x0 = pts.min(0)
    hgt, wid = (int(v) for v in pts.max(0) - (y0, x0) + 1)
    if abs(hgt - wid) > MAX_ASPECT_PX + MAX_ASPECT_FRAC * max(hgt, wid):
        return "blob"
    comp = np.zeros((hgt, wid), dtype=bool)
    comp[pts[:, 0] - y0, pts[:, 1] - x0] = True
    fits = []
    for name, t in shape_templates(hgt, wid).items():
        iou = (comp & t).sum() / float((comp | t).sum())
        fits.append((max(shape_fit(comp, t)), -iou, name))
    misfit, _, name = min(fits)
    return name if misfit <= MAX_MISFIT else "blob"


def detect(image: np.ndarray) -> list[Detection]:
    """Objects in an image: uint8 [H, W, 3] or float [H, W, 3] in [0, 1]."""
    img = np.asarray(image)
    if img.ndim != 3 or img.shape[2] != 3:
        raise ValueError(f"image must be [H, W, 3] (got shape {img.shape})")
    if img.dtype != np.uint8:
        img = np.clip(np.asarray(img, dtype=np.float32) * 255.0, 0, 255)
    img = img.astype(np.float32)
    names = ["background", *COLORS]
    palette = np.array([BACKGROUND, *COLORS.values()], dtype=np.float32)
    dist = np.linalg.norm(img[:, :, None, :] - palette[None, None], axis=-1)  # [H, W, C+1]
    label = dist.argmin(-1)
    label[dist.min(-1) > MAX_COLOR_DIST] = -1
    out = []
    for ci, name in enumerate(names[1:], start=1):
        for pts in _label_components(label == ci):
            if len(pts) < MIN_AREA:
                continue
            (y0, x0), (y1, x1) = pts.min(0), pts.max(0)  # centre = bounding-box centre (GenEval)
            out.append(Detection(classify_shape(pts), name, (x0 + x1 + 1) / 2.0,
                                 (y0 + y1 + 1) / 2.0, len(pts)))
    return out


def _matches(spec_obj: tuple[str, str | None], det: Detection) -> bool:
    shape, color = spec_obj
    return det.shape == shape and (color is None or det.color == color)


def check(spec: Spec, detections: list[Detection]) -> bool:
    """True when the detections realise the spec exactly (see module docstring)."""
    if len(detections) != len(spec.objects):
        return False
    for perm in itertools.permutations(detections):
        if not all(_matches(o, d) for o, d in zip(spec.objects, perm, strict=True)):
            continue
        if spec.relation is None:
            return True
        a, b = perm[0], perm[1]
        if relation_holds(spec.relation, (a.cx, a.cy), (b.cx, b.cy), RELATION_EVAL_PX):
            return True
    return False


def score_images(specs: list[Spec], images: list[np.ndarray] | np.ndarray) -> dict:
    """Per-category accuracy, `overall` = mean over the categories present, and per-item passes."""
    if len(specs) != len(images):
        raise ValueError(f"got {len(specs)} specs but {len(images)} images")
    per_cat: dict[str, list[bool]] = defaultdict(list)
    passed = []
    for spec, img in zip(specs, images, strict=True):
        ok = check(spec, detect(img))
        per_cat[spec.category].append(ok)
        passed.append(ok)
    score = {c: float(np.mean(per_cat[c])) for c in CATEGORIES if c in per_cat}
    return {"score": score, "score_overall": float(np.mean(list(score.values()))), "passed": passed}
