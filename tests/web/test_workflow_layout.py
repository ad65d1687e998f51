"""Example workflows: no node covers another in ComfyUI's frontend.

Node heights follow frontend 1.49.6's own minimum sizes, measured with
tests/web/template_layout.mjs (which also checks the real frontend): 10 px + 24 px per slot row
and per one-line widget, 180 px per multiline text widget; core nodes as measured. A node box
starts TITLE px above its `pos` (the title bar); a collapsed node is its title bar alone.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nodes import node_classes

pytestmark = pytest.mark.frontend_version("1.49.6")  # the minimum node sizes measured there

ROOT = Path(__file__).resolve().parents[2]
UI = sorted((ROOT / "example_workflows").glob("*.json"))
TITLE, GAP = 30, 10
CORE_MIN_HEIGHT = {"PreviewAny": 122, "SaveImage": 58, "ImageStitch": 150,
                   # measured like the others (Load Image with a picture loaded; Pad Image
                   # for Outpainting: 174, where 10 px + 24 px per row would say 178)
                   "ImagePadForOutpaint": 174, "LoadImage": 326,
                   # Upscale Image By, Preview Image (no picture yet) and the frontend's
                   # Markdown note, measured the same way
                   "ImageScaleBy": 82, "PreviewImage": 26, "MarkdownNote": 88}
# ComfyUI-Distributed's nodes by the same rule (10 px + 24 px per row), not measured:
# Distributed Seed = output row + seed widget + its control widget; Collector = images row +
# load_balance widget.
ENGINE_MIN_HEIGHT = {"DistributedSeed": 82, "DistributedCollector": 58}
WIDGETS = {"INT", "FLOAT", "STRING", "BOOLEAN", "COMBO"}


def min_height(node_id: str) -> int:
    """Frontend minimum height of one of our nodes, from its schema."""
    schema = next(c.define_schema() for c in node_classes()
                  if c.define_schema().node_id == node_id)
    sockets = sum(i.io_type not in WIDGETS for i in schema.inputs)
    rows = max(sockets, len(schema.outputs))
    multiline = sum(bool(getattr(i, "multiline", False)) for i in schema.inputs)
    one_line = sum(i.io_type in WIDGETS for i in schema.inputs) - multiline
    one_line += sum(bool(getattr(i, "control_after_generate", False)) for i in schema.inputs)
    return 10 + 24 * (rows + one_line) + 180 * multiline


def box(n: dict) -> tuple[float, float, float, float]:
    """A node's box on the canvas (left, top, right, bottom): its title bar above `pos`; a
    collapsed node is its title bar alone (at most its width)."""
    x, y = n["pos"]
    collapsed = n.get("flags", {}).get("collapsed")
    return x, y - TITLE, x + n["size"][0], y if collapsed else y + n["size"][1]


@pytest.mark.parametrize("path", UI, ids=lambda p: p.stem)
def test_nodes_are_tall_enough_and_do_not_overlap(path: Path) -> None:
    nodes = json.loads(path.read_text())["nodes"]
    boxes = []
    for n in nodes:
        need = ({**CORE_MIN_HEIGHT, **ENGINE_MIN_HEIGHT}.get(n["type"])
                or min_height(n["type"]))
        assert n["size"][1] >= need, (n.get("title", n["type"]), n["size"], need)
        boxes.append((n.get("title", n["type"]), *box(n)))
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            apart = (a[3] + GAP <= b[1] or b[3] + GAP <= a[1] or a[4] + GAP <= b[2]
                     or b[4] + GAP <= a[2])
            assert apart, f"{a[0]} overlaps {b[0]}"


# The new frontend's canvas fills the window under its tab bar and floats a "Graph" menu over
# the top-left corner, whose bottom edge is about 84 px below the window top (frontend 1.49.6,
# 1600 x 900 window, tests/web/frontend_screenshot.mjs).
MENU_BOTTOM_PX = 90
# The canvas also runs under the left sidebar (58 px wide in the same window).
SIDEBAR_RIGHT_PX = 64


@pytest.mark.parametrize("path", UI, ids=lambda p: p.stem)
def test_workflow_opens_clear_of_the_floating_menu_and_the_sidebar(path: Path) -> None:
    data = json.loads(path.read_text())
    ds = data["extra"]["ds"]
    top = min(n["pos"][1] for n in data["nodes"]) - TITLE
    left = min(n["pos"][0] for n in data["nodes"])
    assert (top + ds["offset"][1]) * ds["scale"] >= MENU_BOTTOM_PX, (ds, top)
    assert (left + ds["offset"][0]) * ds["scale"] >= SIDEBAR_RIGHT_PX, (ds, left)


# The window a template must open inside (1600 x 1000), and the minimap the frontend
# floats over its bottom-right corner: 260 x 260 px from that corner (measured at x 1340 and
# y 640 on in a 1600 x 900 window, frontend 1.49.6; at 1600 x 1000 on
# tests/web/step_map_views.mjs's screenshots, open_<i>.png).
WINDOW_PX = (1600, 1000)
MINIMAP_TOP_LEFT_PX = (WINDOW_PX[0] - 260, WINDOW_PX[1] - 260)
# Frontend 1.49.6 opens a template, and a workflow file, fitted to its window whatever view
# the file saved (fitView: the nodes' boxes padded by 10 px, `ds.fitToBounds(..., {zoom:
# 0.75})`), and draws no node title or widget text below the zoom 8 px / 14 px (its
# "LiteGraph.Canvas.MinFontSizeForLOD" over the title font, at a device pixel ratio of 1).
# tests/web/test_web_template_zoom.py measures both in the real frontend.
WINDOWS_PX = ((1600, 1000), (1280, 800))
FIT_ZOOM, FIT_PAD = 0.75, 10
LOW_QUALITY_SCALE = 8 / 14


def opened_scale(nodes: list[dict], window: tuple[int, int]) -> float:
    """The zoom the frontend opens these nodes at in `window`."""
    boxes = [box(n) for n in nodes]
    width = max(b[2] for b in boxes) - min(b[0] for b in boxes) + 2 * FIT_PAD
    height = max(b[3] for b in boxes) - min(b[1] for b in boxes) + 2 * FIT_PAD
    return FIT_ZOOM * min(window[0] / max(width, 300), window[1] / max(height, 300))


@pytest.mark.parametrize("path", UI, ids=lambda p: p.stem)
def test_workflow_opens_at_a_zoom_where_text_is_drawn(path: Path) -> None:
    """Before, the image to image template opened at 0.56 in a 1600 x 1000 window, and every
    template below 0.571 in a 1280 x 800 one: no title, no widget label drawn."""
    data = json.loads(path.read_text())
    for window in WINDOWS_PX:
        assert opened_scale(data["nodes"], window) >= LOW_QUALITY_SCALE, window
    assert abs(data["extra"]["ds"]["scale"] - opened_scale(data["nodes"], WINDOWS_PX[0])) < 1e-3


@pytest.mark.parametrize("path", UI, ids=lambda p: p.stem)
def test_workflow_opens_with_every_node_in_sight(path: Path) -> None:
    """Every node whole in the window at the saved view (the one it opens at), none under the
    minimap (before, at 0.65 only the image to image template's left part was in a 1600 px
    window)."""
    data = json.loads(path.read_text())
    ds = data["extra"]["ds"]
    for n in data["nodes"]:
        name = n.get("title", n["type"])
        x0, y0, x1, y1 = box(n)
        left, top = (x0 + ds["offset"][0]) * ds["scale"], (y0 + ds["offset"][1]) * ds["scale"]
        right = (x1 + ds["offset"][0]) * ds["scale"]
        bottom = (y1 + ds["offset"][1]) * ds["scale"]
        assert left >= 0 and top >= 0, (name, left, top, ds)
        assert right <= WINDOW_PX[0] and bottom <= WINDOW_PX[1], (name, right, bottom, ds)
        under_minimap = right > MINIMAP_TOP_LEFT_PX[0] and bottom > MINIMAP_TOP_LEFT_PX[1]
        assert not under_minimap, (name, right, bottom, ds)
