"""The layout the documents describe, held to the tree: docs/ARCHITECTURE.md's Layout block
names every web/ module, every example_workflows/ folder and every lab/ area (and nothing that
is gone), and every `python -m lab....` command a document names is a module that exists."""

from __future__ import annotations

import importlib.util
import re

import pytest
from support import ROOT

ARCH = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), ROOT / "lab" / "README.md"])


def layout_paths() -> set[str]:
    """Every path the Layout block names (files and folders), nested by indent."""
    block = next(b for b in re.findall(r"```[a-z]*\n(.*?)```", ARCH, flags=re.S)
                 if b.startswith("__init__.py"))
    stack: list[tuple[int, str]] = []
    found = set()
    for line in block.splitlines():
        word = line.split()[0] if line.strip() else ""
        indent = len(line) - len(line.lstrip())
        if not re.fullmatch(r"[\w.-]+/|[\w.-]+\.\w+", word) or indent >= 23:
            continue  # a continued description
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = "".join(p for _, p in stack) + word
        found.add(path)
        if word.endswith("/"):
            stack.append((indent, word))
    return found


def tree(folder: str, pattern: str) -> set[str]:
    return {str(p.relative_to(ROOT)) + ("/" if p.is_dir() else "")
            for p in (ROOT / folder).glob(pattern) if p.name != "__pycache__"}


@pytest.mark.parametrize("folder, pattern", [("web", "*.js"), ("web", "*/"),
                                             ("example_workflows", "*/"), ("lab", "*/")])
def test_the_layout_names_what_the_tree_holds(folder, pattern):
    in_tree = {p for p in tree(folder, pattern) if pattern != "*/" or p.endswith("/")}
    named = {p for p in layout_paths()
             if p.startswith(folder + "/") and p.count("/") == (2 if pattern == "*/" else 1)
             and p.endswith("/") == pattern.endswith("/")}
    assert in_tree, f"nothing matches {folder}/{pattern}"
    assert sorted(in_tree - named) == [], f"{folder}/ entries missing from the Layout block"
    assert sorted(named - in_tree) == [], f"the Layout block names missing {folder}/ entries"


def test_the_root_holds_the_product_and_one_lab():
    named = {p for p in layout_paths() if p.count("/") == 1 and p.endswith("/")}
    folders = {p.name + "/" for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".")
               and (ROOT / ".git").exists() and _tracked(p.name)}
    assert sorted(folders - named - {"docs/"}) == [], "root folders missing from the Layout block"


def _tracked(name: str) -> bool:
    import subprocess

    out = subprocess.run(["git", "ls-files", "--", name], cwd=ROOT, capture_output=True,
                         text=True, check=False).stdout
    return bool(out.strip())


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
