"""The web tests' shared pieces: node, playwright-core and Chromium are there, or the test skips
with the command that installs them (scripts/setup.sh installs all three); the extension laid
out as ComfyUI serves it, for tests that run it in node against a stub of ComfyUI's app."""

from __future__ import annotations

import os
import shutil
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
