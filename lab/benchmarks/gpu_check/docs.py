"""The documents' GPU figures, written from gpu_check's JSON (render.py) between markers:

    <!-- gpu_check:begin NAME -->
    ...generated...
    <!-- gpu_check:end -->

so a rerun replaces exactly that. The JSON is the newest full GPU run under
lab/results/ (``gpu_check_<device>.json``, not a smoke run); without one, every block
says its figures are pending, names the command that measures them, and the older committed
H100 figures are marked as measured on older code. README.md is rewritten only where it holds
the markers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from lab.benchmarks.common import REPO_ROOT, RESULTS_DIR

from . import render

__all__ = ["BLOCKS", "check_docs", "latest_run", "update_docs"]

BLOCKS: dict[str, tuple[str, ...]] = {
    "docs/reports/GPU.md": ("plan", "status", "correctness", "speed", "per_image",
                            "calibration", "older"),
    "docs/USAGE.md": ("usage-memory",),
    "docs/reports/SELF_SCORE.md": ("self-score-calibration",),
    "README.md": ("readme",),
}
OPTIONAL = {"README.md"}
PATTERN = r"(<!-- gpu_check:begin {name} -->\n)(.*?)(<!-- gpu_check:end -->)"


def latest_run() -> tuple[dict[str, Any] | None, Path | None]:
    """The newest committed full GPU run (not a smoke run, not a CPU), or (None, None)."""
    runs = []
    for path in sorted(RESULTS_DIR.glob("gpu_check_*.json")):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not doc.get("smoke") and doc.get("device") != "cpu":
            runs.append((doc.get("env", {}).get("utc", ""), str(path), doc))
    if not runs:
        return None, None
    _, path, doc = max(runs)
    return doc, Path(path)


def _rendered(path: Path | None) -> tuple[dict[str, str], Path | None]:
    if path is None:
        doc, path = latest_run()
    else:
        doc = json.loads(Path(path).read_text())
    where = None if path is None else _relative(Path(path))
    names = {n for names in BLOCKS.values() for n in names}
    return {n: render.block(n, doc, where) for n in names}, path


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def _apply(text: str, names: tuple[str, ...], blocks: dict[str, str], file: str
           ) -> tuple[str, list[str]]:
    """``text`` with each named block replaced, and the names whose markers are missing."""
    missing = []
    for name in names:
        pattern = re.compile(PATTERN.format(name=re.escape(name)), re.S)
        if not pattern.search(text):
            missing.append(f"{file}: {name}")
            continue
        body = blocks[name].rstrip("\n") + "\n"
        text = pattern.sub(lambda m, body=body: m.group(1) + body + m.group(3), text)
    return text, missing


def update_docs(path: Path | None = None, write: bool = True) -> list[str]:
    """Rewrite every block from ``path`` (default: the newest committed run); returns the files
    that changed (or, with ``write=False``, would change). A required block whose markers are
    missing raises ValueError naming it."""
    blocks, _ = _rendered(path)
    changed = []
    for file, names in BLOCKS.items():
        target = REPO_ROOT / file
        text = target.read_text()
        new, missing = _apply(text, names, blocks, file)
        if missing and file not in OPTIONAL:
            raise ValueError(f"markers missing: {', '.join(missing)}; put "
                             "<!-- gpu_check:begin NAME --> / <!-- gpu_check:end --> back")
        if new != text:
            changed.append(file)
            if write:
                target.write_text(new)
    return changed


def check_docs() -> list[str]:
    """The files whose generated parts differ from what ``update_docs()`` would write."""
    return update_docs(write=False)
