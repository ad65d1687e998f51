"""Running scripts as programs: the lab's tests run its benchmark scripts this way (the
product's tests never import lab/)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from . import ROOT


def run_script(module: str, *args: str, timeout: float = 900, ok: bool = True
               ) -> subprocess.CompletedProcess:
    """``python -m <module> <args>`` from the repository root; with ``ok`` its exit status must
    be 0 (the failure shows its stderr)."""
    proc = subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=timeout, check=False)
    if ok:
        assert proc.returncode == 0, f"{module} {args} failed:\n{proc.stderr[-4000:]}"
    return proc


def bench_json(name: str, out: Path, *extra: str, file: str | None = None) -> dict[str, Any]:
    """``python -m lab.benchmarks.<name> --tiny --threads 0 --out OUT ...`` and its JSON (with the
    environment every result records: time, commit, torch, threads)."""
    run_script(f"lab.benchmarks.{name}", "--tiny", "--threads", "0", "--out", str(out), *extra)
    doc = json.loads((out / (file or f"{name}.json")).read_text())
    assert {"utc", "git_commit", "torch", "torch_threads", "note"} <= set(doc["env"])
    return doc
