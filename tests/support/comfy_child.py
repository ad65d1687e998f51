"""Run a script in ComfyUI's own Python, the way the host imports the pack, and read back the
one JSON result it prints: for tests that need ComfyUI's real layer classes, model management
or quantized tensors in a fresh process (tests/host)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from support import ROOT


def run_child(body: str, timeout: int = 600) -> dict:
    """Run ``body`` (with COMFY = $COMFYUI_PATH and ROOT defined first) in $COMFYUI_PYTHON, one
    thread, the pack's host import forced; its last line starting "RESULT" is the JSON it
    returns. A failing child fails the test with the end of its stderr."""
    code = f"COMFY = {os.environ.get('COMFYUI_PATH')!r}\nROOT = {str(ROOT)!r}\n" + body
    py = os.environ.get("COMFYUI_PYTHON", sys.executable)
    env = {**os.environ, "LADR_FORCE_HOST_IMPORT": "1", "OMP_NUM_THREADS": "1"}
    run = subprocess.run([py, "-c", code], cwd=str(ROOT), capture_output=True, text=True,
                         timeout=timeout, env=env, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    line = [ln for ln in run.stdout.splitlines() if ln.startswith("RESULT")][-1]
    return json.loads(line[len("RESULT"):])
