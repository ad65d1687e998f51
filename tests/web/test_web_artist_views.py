"""Issue 63 findings 3 to 6 in the REAL ComfyUI frontend (headless Chromium, 1600 x 1000),
driven by tests/web/artist_views.mjs against a real server with the pack, on the nano
text-to-image template:

* DiMOO Canvas's width widget takes every size nano draws (its grid is 4 px: 52 stays 52) and
  rounds what it cannot draw onto that grid;
* a width of 50 (a workflow file) is refused at /prompt, before anything runs, one message
  naming width and the connected model's grid alone, drawn on width alone; the next good run
  (52) works;
* 2048 x 48 names width and a width that fits (it runs), not the prompt;
* the step map is drawn at its true aspect after the run, a tab switch and a reload; a failed
  run leaves no "cached:" on it;
* the sampler's title follows the rule's strategy; the official sampler's step map says what it
  decoded (no "n/a", no "0 rescued"); no "ladr_preview" row in the Parameters panel; no
  "checkState() is deprecated" warning.

Skipped without COMFYUI_PATH (scripts/host.sh), the shipped nano model, node, playwright-core
or chromium. The screenshots stay in pytest's temporary folder.
"""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest
from support import ROOT
from support.browser import require_browser
from support.comfy_server import NANO_READY

from tests.kit.templates import TEMPLATE_FILES

pytestmark = [pytest.mark.comfyui, pytest.mark.browser,
              pytest.mark.skipif(not os.environ.get("COMFYUI_PATH"),
                                 reason="set COMFYUI_PATH to a ComfyUI checkout (scripts/host.sh)"),
              pytest.mark.skipif(not NANO_READY, reason="needs the shipped dimoo-nano model")]


@pytest.fixture(scope="module")
def seen(server, tmp_path_factory):
    require_browser()
    port, _ = server
    out = tmp_path_factory.mktemp("artist")
    wf = ROOT / "example_workflows" / f"{TEMPLATE_FILES['ladr_nano_text_to_image']}.json"
    proc = subprocess.run(["node", str(ROOT / "tests" / "web" / "artist_views.mjs"),
                           f"http://127.0.0.1:{port}", str(out), str(wf)],
                          capture_output=True, text=True, timeout=900, check=False)
    print(f"screenshots: {out}")
    assert (out / "summary.json").is_file(), proc.stderr[-3000:]
    return json.loads((out / "summary.json").read_text())


def test_every_part_of_the_session_ran(seen) -> None:
    assert not seen["failed"], seen["failed"]


def test_the_width_widget_takes_every_size_the_connected_model_draws(seen) -> None:
    steps = seen["steps"]
    assert steps["step"] == 4, steps  # nano: one token per 4 x 4 px
    assert steps["got"] == {"52": 52, "50": 52, "47": 48}, steps  # onto nano's grid
    assert steps["restored"] == 48, steps


def test_an_off_grid_width_is_refused_on_width_alone_before_anything_runs(seen) -> None:
    """Before, it failed when DiMOO Canvas ran, the whole node outlined; now /prompt refuses
    it (400: nothing runs, Load DiMOO Model's new dtype never loads), with one message naming
    width and nano's grid alone, and the frontend rings width alone (ComfyUI's answer has it on
    height too: web/ladr_named_input.js keeps it on the input it names). The next good run
    (52, on nano's 4 px grid) works."""
    run, canvas = seen["runs"]["bad_width"], seen["ids"]["LADR_Canvas"]
    assert run["status"] == 400, run
    errors = run["answer"]["node_errors"]
    assert list(errors) == [canvas], errors
    assert {e["details"].split(" - ", 1)[1] for e in errors[canvas]["errors"]} == {
        "DiMOO Canvas: width=50 is off the token grid of the connected model dimoo-nano (one "
        "token per 4 x 4 px); nearest valid width: 48 or 52"}, errors
    assert run["drawn"] == {"node": True, "inputs": ["width"]}, run["drawn"]
    assert run["executing"] == [] and run["done"] == 0, run
    good = seen["runs"]["next_good"]
    assert good["status"] == 200 and good["done"] == 1 and not good["errors"], good
    assert seen["ids"]["LADR_LoadDiMOOModel"] in good["executing"], good  # its new dtype


def test_too_many_tokens_names_the_width_and_a_width_that_fits(seen) -> None:
    """2048 x 48 on nano: the image alone is too large, and only a narrower width fits (it said
    "shorten the prompt"); the width it names runs."""
    run = seen["runs"]["too_wide"]
    (error,) = run["errors"]
    assert error["message"].startswith("DiMOO Sampler: canvas's width=2048 makes the image too "
                                       "large: 2048 x 48 px need "), error
    fit = re.search(r"set width to at most (\d+) \(at height 48\)", error["message"])
    assert fit and 48 < int(fit[1]) < 2048, error
    assert "shorten the prompt" not in error["message"], error
    fits = seen["runs"]["fits"]
    assert fits["done"] == 1 and not fits["errors"], fits


@pytest.mark.parametrize("when", ["run", "tab", "reload", "cached", "failed", "baseline"])
def test_the_step_map_is_drawn_at_its_true_aspect(seen, when) -> None:
    """Its bitmap is the size it is laid out at (times the pixel ratio): not stretched."""
    state = seen["maps"][when]
    (bw, bh), (cw, ch), dpr = state["bitmap"], state["box"], state["dpr"]
    assert cw > 100 and ch > 100, state
    assert abs(bw - round(cw * dpr)) <= 1 and abs(bh - round(ch * dpr)) <= 1, state


def test_a_failed_run_clears_cached_from_the_step_map(seen) -> None:
    assert any(t.startswith("cached: from the run at ") for t in seen["maps"]["cached"]["texts"])
    failed = seen["maps"]["failed"]
    assert not failed["cached"] and failed["done"], failed
    assert not any(t.startswith("cached:") for t in failed["texts"]), failed["texts"]
    assert any(t.startswith("from the run at ") for t in failed["texts"]), failed["texts"]


def test_the_samplers_title_follows_the_rule(seen) -> None:
    assert seen["title"] == "DiMOO Sampler (ladr-global)"  # as the template opens
    assert seen["maps"]["baseline"]["title"] == "DiMOO Sampler (baseline)"


def test_the_official_samplers_step_map_says_what_it_decoded(seen) -> None:
    texts = seen["baselineTexts"]
    assert texts, seen["runs"]["baseline"]
    assert not any("n/a" in t or "rescued" in t for t in texts), texts
    assert any(t.endswith("decoded this step (official sampler)") for t in texts), texts


def test_no_empty_preview_row_in_the_parameters_panel(seen) -> None:
    assert "prompt" in seen["panel"] and "seed" in seen["panel"], seen["panel"]
    assert "ladr_preview" not in seen["panel"], seen["panel"]


def test_no_deprecation_warning_from_the_pack(seen) -> None:
    """The step map keeps its record with the workflow through the change tracker's current
    call (captureCanvasState), not checkState, which frontend 1.49 warns is deprecated."""
    assert seen["runs"]["first"]["done"] == 1  # the run that keeps the record happened
    assert not [w for w in seen["warnings"] if "checkState" in w], seen["warnings"]
