"""The step map outlives the page's state, in the REAL ComfyUI frontend (headless Chromium,
1600 x 1000), driven by tests/web/step_map_views.mjs against a real server with the pack
(lab/workflows/build_examples.py): after the nano text-to-image template runs, its sampler's step map shows the
finished run and the node its last preview; both are still there after switching to another workflow tab and back, after a
page reload, and after the same prompt queued again, which ComfyUI serves from its cache (then
it says "cached: from the run at <time>"). A canvas height of 50 px (a hand-edited file) is refused
at /prompt with one message naming height and the connected nano's grid, drawn on height alone. Every template in example_workflows/ opens in a
1600 x 1000 window whole, with its widget text at least 8 px high.

Skipped without COMFYUI_PATH (scripts/host.sh), the shipped nano model, node, playwright-core
or chromium. The screenshots stay in pytest's temporary folder (map_<when>.png, bad_size.png).
"""

from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest
from PIL import Image
from support import ROOT
from support.browser import require_browser, step_map_cells
from support.comfy_server import NANO_READY

from tests.kit.templates import TEMPLATE_FILES

pytestmark = [pytest.mark.comfyui, pytest.mark.browser,
              pytest.mark.skipif(not os.environ.get("COMFYUI_PATH"),
                                 reason="set COMFYUI_PATH to a ComfyUI checkout (scripts/host.sh)"),
              pytest.mark.skipif(not NANO_READY, reason="needs the shipped dimoo-nano model")]
WHEN = ("run", "tab", "reload", "cached")
TEMPLATES = sorted((ROOT / "example_workflows").glob("*.json"))  # what the browser lists
READABLE_PX = 8  # the frontend's own "no text below" size (MinFontSizeForLOD)


def map_pixels(shot) -> int:
    """Pixels of a screenshot within 12 levels of a finished step map's cell colours (a decoded
    token's and one the rescue decoded, as the drawing code paints them)."""
    final = step_map_cells()["final"]
    with Image.open(shot) as im:
        arr = np.asarray(im.convert("RGB")).astype(int)
    near = [np.abs(arr - [int(c[i:i + 2], 16) for i in (1, 3, 5)]).max(-1) <= 12
            for c in (final[0], final[5])]
    return int(np.logical_or.reduce(near).sum())


@pytest.fixture(scope="module")
def views(server, tmp_path_factory):
    require_browser()
    port, _ = server
    out = tmp_path_factory.mktemp("stepmap")
    wf = ROOT / "example_workflows" / f"{TEMPLATE_FILES['ladr_nano_text_to_image']}.json"
    proc = subprocess.run(["node", str(ROOT / "tests" / "web" / "step_map_views.mjs"),
                           f"http://127.0.0.1:{port}", str(out), str(wf), *map(str, TEMPLATES)],
                          capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    print(f"step map screenshots: {out}")
    return out, json.loads((out / "summary.json").read_text())


@pytest.mark.parametrize("when", WHEN)
def test_the_step_map_shows_the_finished_run(views, when) -> None:
    out, summary = views
    state = summary["states"][when]
    assert state["done"], state
    assert not any("waiting for a run" in t for t in state["texts"]), state
    assert any(t.startswith("done: ") for t in state["texts"]), state  # the stats line
    assert map_pixels(out / f"map_{when}.png") > 2000, when  # the map is on the screen
    assert state["hasProperty"], state  # kept with the workflow (what a reload restores)
    assert state["preview"] and state["imgs"] >= 1, state  # the last preview, on the node
    restored = [t for t in state["texts"] if "from the run at" in t]
    if when == "run":  # drawn live from the events: no "from the run" line
        assert not restored and not state["restored"], state
    elif when == "cached":
        assert state["cached"] and restored and restored[0].startswith("cached: from the run "
                                                                       "at "), state
    else:
        assert state["restored"] and not state["cached"], state
        assert restored and restored[0].startswith("from the run at "), state


def test_the_cached_run_was_served_from_comfyuis_cache(views) -> None:
    _, summary = views
    sampler = summary["states"]["cached"]["id"]
    assert any(sampler in nodes for nodes in summary["cachedNodes"]), summary["cachedNodes"]


def test_a_size_off_the_models_grid_is_one_error_on_its_input(views) -> None:
    _, summary = views
    bad = summary["badSize"]  # refused at /prompt (tests/web/test_web_artist_views.py: width)
    assert bad["status"] == 400 and list(bad["answer"]["node_errors"]) == [bad["canvas"]], bad
    (message,) = {e["details"].split(" - ", 1)[1]
                  for e in bad["answer"]["node_errors"][bad["canvas"]]["errors"]}
    assert message.startswith("DiMOO Canvas: height=50 is off the token grid of the connected "
                              "model dimoo-nano (one token per 4 x 4 px)"), message
    assert "16 x 16" not in message and "width" not in message, message
    assert bad["drawn"] == {"node": True, "inputs": ["height"]}, bad["drawn"]


def test_every_template_opens_whole_with_text_that_reads(views) -> None:
    """Before, the image to image template opened at 0.4 zoom, where the frontend switches
    to its low-quality drawing (no text), then at 0.65 with only its left part in the window.
    Each template opened at its saved view in a 1600 x 1000 window: the frontend draws it in
    full quality, its widget text (the canvas's own font size x zoom) is at least READABLE_PX
    high and every node, title bar included, lies inside the window, clear of the others."""
    out, summary = views
    assert [o["file"] for o in summary["opened"]] == [str(t) for t in TEMPLATES]
    for i, opened in enumerate(summary["opened"]):
        name = opened["file"].rsplit("/", 1)[-1]
        width, height = opened["window"]
        assert (width, height) == (1600, 1000), opened["window"]
        assert not opened["lowQuality"], (name, opened["scale"])
        text_px = opened["widgetFontPx"] * opened["scale"]
        assert text_px >= READABLE_PX, (name, opened["widgetFontPx"], opened["scale"])
        assert opened["titleFontPx"] >= opened["widgetFontPx"], opened  # titles read too
        outside = [n for n in opened["nodes"] if n["left"] < 0 or n["top"] < 0
                   or n["right"] > width or n["bottom"] > height]
        assert opened["nodes"] and not outside, (name, outside)
        boxes = opened["nodes"]  # as the frontend sized them: none covers another
        covered = [(a["title"], b["title"]) for k, a in enumerate(boxes) for b in boxes[k + 1:]
                   if a["left"] < b["right"] and b["left"] < a["right"]
                   and a["top"] < b["bottom"] and b["top"] < a["bottom"]]
        assert not covered, (name, covered)
        assert (out / f"open_{i}.png").stat().st_size > 20_000, opened
