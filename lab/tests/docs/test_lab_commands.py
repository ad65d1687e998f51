"""Every `python -m lab....` (or `tests.kit`) command a document names is a module that exists:
a reader who copies one from README, docs/ or lab/README.md gets a program, not an error.
(The documents' folder map is not held to the tree: docs/ARCHITECTURE.md names folders and
invariants, not files, so adding a file changes no document.)"""

from __future__ import annotations

import importlib.util
import re

import pytest
from support import ROOT

DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), ROOT / "lab" / "README.md"])


def lab_commands() -> dict[str, str]:
    """module -> the first document naming `python -m <module>` for a lab or tests.kit module."""
    found: dict[str, str] = {}
    for doc in DOCS:
        for module in re.findall(r"python3? -m ((?:lab|tests\.kit)(?:\.\w+)+)(?![.\w])", doc.read_text(encoding="utf-8")):
            found.setdefault(module, str(doc.relative_to(ROOT)))
    return found


def test_the_documents_name_lab_commands():
    assert len(lab_commands()) >= 10  # the parser reads the documents' commands


@pytest.mark.parametrize("module", sorted(lab_commands()))
def test_every_documented_lab_command_is_a_module(module):
    spec = importlib.util.find_spec(module)
    if spec is not None and spec.submodule_search_locations is not None:
        spec = importlib.util.find_spec(module + ".__main__")  # a package runs its __main__
    assert spec is not None, (
        f"{lab_commands()[module]} names `python -m {module}`, which is no runnable module")
