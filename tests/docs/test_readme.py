"""README.md stays a short guide (its node table is held to the registry by
tests/nodes/test_node_registry.py). docs/ARCHITECTURE.md is a map of folders and invariants
held to nothing: it names no file and no signature, so a refactor does not touch it."""

from __future__ import annotations

from support import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_stays_a_short_guide():
    assert len(README.splitlines()) <= 200
