"""The web tests' shared pieces: node, playwright-core and Chromium are there, or the test skips
with the command that installs them (scripts/setup.sh installs all three); the extension laid
out as ComfyUI serves it, for tests that run it in node against a stub of ComfyUI's app."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from . import ROOT

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
APP_STUB = ("export const app = { extensions: [], registerExtension(e) { "
            "this.extensions.push(e); } };")


def extension_stub(root: Path, app_js: str = APP_STUB) -> Path:
    """`root` laid out as ComfyUI serves the extension: every module of web/ under
    extensions/ComfyUI-LADR and `app_js` as scripts/app.js (their `../../scripts/app.js`).
    Skips when node is missing. Returns `root`."""
    if shutil.which("node") is None:
        pytest.skip("node is not installed (scripts/setup.sh installs nodejs)")
    ext = root / "extensions" / "ComfyUI-LADR"
    ext.mkdir(parents=True)
    for module in (ROOT / "web").glob("*.js"):
        shutil.copy(module, ext / module.name)
    (root / "scripts").mkdir()
    (root / "scripts" / "app.js").write_text(app_js)
    return root


def require_browser() -> None:
    """CI installs these in scripts/setup.sh; a bare machine gets a clear skip reason."""
    if shutil.which("node") is None:
        pytest.skip("node is not installed (scripts/setup.sh installs nodejs)")
    if not (ROOT / "tests" / "web" / "node_modules" / "playwright-core").is_dir():
        pytest.skip("playwright-core missing: run `npm ci --prefix tests/web` (scripts/setup.sh)")
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} missing: apt-get install -y chromium (scripts/setup.sh)")


def widget_record(done_masked: bool) -> dict:
    """A step record on a 3 x 4 grid: row 2 still masked (unless ``done_masked``), tokens 5 and
    6 rescued this step."""
    masked = torch.zeros(1, 12, dtype=torch.bool)
    if not done_masked:
        masked[0, 8:] = True
    rescued = torch.zeros(1, 12, dtype=torch.bool)
    rescued[0, [5, 6]] = True
    return {"step": 4, "steps": 64, "strategy": "ladr", "tokens": torch.arange(12)[None],
            "masked": masked, "rescued": rescued, "unmasked": rescued | (torch.arange(12) < 2),
            "nfe": 5, "t_eff": torch.tensor([0.4]), "phase": torch.tensor([1]), "grid": (3, 4)}


DRAWN = """
import { fitRect, footerHeight, headerHeight, planFrame, shownPayload, trackRun }
  from "%s";
const [payloads] = JSON.parse(process.argv[1]);
let run = null;
const frames = payloads.map((p) => {
  run = trackRun(run, p);
  const shown = shownPayload(run, p);
  const ops = planFrame(shown, 400, 300).filter((o) => o.op === "rect");
  const r = fitRect(p.grid, 400, 300, headerHeight(shown), footerHeight(shown));
  const [gh, gw] = p.grid;
  return Array.from({ length: gh * gw }, (_, i) => {
    const x = r.x + ((i %% gw) + 0.5) * r.cell, y = r.y + (Math.floor(i / gw) + 0.5) * r.cell;
    return ops.filter((o) => o.x <= x && x < o.x + o.w && o.y <= y && y < o.y + o.h).pop().fill;
  });
});
console.log(JSON.stringify(frames));
"""


def step_map_cells() -> dict[str, list[str]]:
    """The fill web/ladr_preview_draw.js paints under each cell of widget_record's grid (run in
    node), mid-run ("step") and on the final frame ("final"), from the events the sampler sends
    for it (nodes/events.py). Skips when node is missing."""
    if shutil.which("node") is None:
        pytest.skip("node is not installed (scripts/setup.sh installs nodejs)")
    from nodes import events

    step = events.step_payload(widget_record(False), "7")
    stats = {"strategy": "ladr", "steps": 14, "nfe": 14, "seconds": 1.0}
    final = events.final_payload("7", stats, events.step_payload(widget_record(True), "7"))
    script = DRAWN % (ROOT / "web" / "ladr_preview_draw.js").as_uri()
    proc = subprocess.run(["node", "--input-type=module", "-e", script,
                           json.dumps([[step, final]])],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    return dict(zip(("step", "final"), json.loads(proc.stdout), strict=True))
