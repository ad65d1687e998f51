"""What every emoji results file records beside its figures: commit, machine, pinned packages."""

from __future__ import annotations

from lab.benchmarks.common import env_info
from lab.emoji.packages import PACKAGES


def provenance() -> dict:
    return {"env": env_info(),
            "packages": [{"name": p.name, "version": p.version, "style": p.style}
                         for p in PACKAGES]}
