"""What a clone carries: no tracked file over 1 MB except the weights of the shipped built-in
checkpoints (ladr_core/assets: every folder of nodes.loader.BUILT_IN). Derived from ``git
ls-files`` of this checkout; skipped outside a git checkout."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from support import ROOT

import ladr_core
from nodes import BUILT_IN

MAX_FILE_BYTES = 1_000_000


def tracked_files() -> list[Path]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False)
    if out.returncode != 0:
        pytest.skip(f"git ls-files failed: {out.stderr.decode(errors='replace')[-200:]}")
    return [ROOT / name for name in out.stdout.decode().split("\0") if name]


def test_no_tracked_file_over_1_mb_but_the_built_in_checkpoints() -> None:
    shipped = {Path(getattr(ladr_core, function)()).resolve() for function in BUILT_IN.values()}
    files = [p for p in tracked_files() if p.is_file()]
    assert files, "git ls-files listed no file"
    big = {str(p.relative_to(ROOT)): p.stat().st_size for p in files
           if p.stat().st_size > MAX_FILE_BYTES and not shipped & set(p.resolve().parents)}
    assert not big, (f"tracked files over {MAX_FILE_BYTES} bytes (store them compactly, as "
                     f"lab/studies/run_store.py and lab.benchmarks.common.json_text do): {big}")
