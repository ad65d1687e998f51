"""What every emoji results file records beside its figures: commit, machine, pinned packages,
and the files of the lab's emoji code that differed from that commit when it ran (none, for a
figure of committed code)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from lab.benchmarks.common import env_info
from lab.emoji.packages import PACKAGES

ROOT = Path(__file__).resolve().parents[2]


def uncommitted() -> list[str] | None:
    """Changed or new files under lab/emoji at run time (None outside a git checkout)."""
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--", "lab/emoji"], cwd=ROOT,
                             capture_output=True, text=True, check=False)
    except OSError:
        return None
    return sorted(line[3:] for line in out.stdout.splitlines()) if out.returncode == 0 else None


def provenance() -> dict:
    return {"env": env_info(), "uncommitted_emoji_code": uncommitted(),
            "packages": [{"name": p.name, "version": p.version, "style": p.style}
                         for p in PACKAGES]}
