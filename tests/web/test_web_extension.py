"""The ComfyUI extension module (web/ladr_preview.js) in headless Chromium with stand-ins for
the frontend's app/api modules: it adds one canvas widget to DiMOO Sampler nodes only, listens
to "ladr.step", ignores events for other node ids and draws the preview of its own node."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support.browser import require_browser, widget_record

from nodes import events

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.browser


def test_extension_attaches_to_sampler_and_draws_its_events(tmp_path) -> None:
    require_browser()
    payload = events.step_payload(widget_record(False), "7")
    src, out = tmp_path / "p.json", tmp_path / "o.json"
    src.write_text(json.dumps(payload))
    proc = subprocess.run(["node", str(ROOT / "tests" / "web" / "extension_harness.mjs"),
                           str(src), str(out)], capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(out.read_text())
    assert res["name"] == "comfyui-ladr.live-preview"
    assert res["samplerWidgets"] == [["ladr_preview", False]]  # not saved into workflows
    assert res["otherWidgets"] == 0 and res["canvases"] == 1
    assert res["before"] != res["after"]  # the step event was drawn
    # the centre of a 3x4 grid is token (1, 2) -> index 6, rescued this step (amber)
    r, g, b = res["after"]
    assert r > 200 and g > 150 and b < 100, res["after"]
