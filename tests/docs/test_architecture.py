"""docs/ARCHITECTURE.md and README.md checked like code: the layout against the tree, the step
record against STEP_RECORD_KEYS, the entry points' signatures against the pipeline, README's
node table against the registered nodes. A change to the code fails here until the text
follows it."""

from __future__ import annotations

import ast
import inspect
import re

import pytest
from support import ROOT

from ladr_core.dimoo import DiMOOPipeline
from ladr_core.sampling import STEP_RECORD_KEYS
from nodes import node_classes

ARCH = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
README = (ROOT / "README.md").read_text(encoding="utf-8")


def code_blocks(text: str) -> list[str]:
    return re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S)


def documented_files() -> set[str]:
    """The paths the Layout block names: each line's first word, nested by its indent."""
    block = next(b for b in code_blocks(ARCH) if b.startswith("__init__.py"))
    stack: list[tuple[int, str]] = []
    found = set()
    for line in block.splitlines():
        word = line.split()[0] if line.strip() else ""
        indent = len(line) - len(line.lstrip())
        if not (word.endswith("/") or word.endswith(".py")) or indent >= 23:
            continue  # a continued description
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = "".join(p for _, p in stack) + word
        if word.endswith("/"):
            stack.append((indent, word))
        else:
            found.add(path)
    return found


def tree_files() -> set[str]:
    return {str(p.relative_to(ROOT)) for root in ("ladr_core", "nodes")
            for p in (ROOT / root).rglob("*.py")
            if p.name not in ("__init__.py", "__main__.py")} | {"ladr_core/__init__.py",
                                                                  "nodes/__init__.py"}


def test_the_layout_names_every_module_and_only_modules_that_exist():
    documented = {p for p in documented_files() if p.startswith(("ladr_core/", "nodes/"))}
    assert "ladr_core/dimoo/weights/files.py" in documented  # the parser reads nested levels
    assert sorted(tree_files() - documented) == [], "modules missing from the Layout block"
    assert sorted(documented - tree_files()) == [], "the Layout block names missing modules"


def test_the_step_record_table_is_step_record_keys_in_order():
    rows = re.findall(r"^  \| `([a-z_]+)` \|", ARCH, flags=re.M)
    assert tuple(rows) == STEP_RECORD_KEYS


def documented_calls() -> dict[str, ast.Call]:
    """`pipe.<method>(...)` signature lines of section 2, parsed as calls."""
    section = ARCH[ARCH.index("## 2. DiMOO runtime contract"):ARCH.index("## 3.")]
    block = next(b for b in code_blocks(section) if b.startswith("pipe.generate("))
    calls = {}
    for node in ast.walk(ast.parse(block)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            calls[node.func.attr] = node
    return calls


@pytest.mark.parametrize("method", ["generate", "paint", "edit", "prepare_text",
                                    "prepare_paint", "prepare_edit", "run", "self_score",
                                    "make_denoiser"])
def test_entry_point_signatures_are_the_documented_ones(method):
    call = documented_calls()[method]
    params = list(inspect.signature(getattr(DiMOOPipeline, method)).parameters.values())[1:]
    names = [a.id for a in call.args] + [k.arg for k in call.keywords]
    assert names == [p.name for p in params]
    for kw in call.keywords:
        default = next(p.default for p in params if p.name == kw.arg)
        assert ast.literal_eval(kw.value) == default, kw.arg
    assert all(p.default is inspect.Parameter.empty for p in params[:len(call.args)])


def test_readme_node_table_lists_every_registered_node():
    section = README[README.index("## The nodes"):]
    section = section[:section.index("\n## ", 4)]
    listed = re.findall(r"^\| \*\*(.+?)\*\* \|", section, flags=re.M)
    shown = [cls.define_schema().display_name for cls in node_classes()]
    assert sorted(listed) == sorted(shown)


def test_readme_stays_a_short_guide():
    assert len(README.splitlines()) <= 200
