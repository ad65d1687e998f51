"""README.md checked like code: its node table against the registered nodes, its length.
(docs/ARCHITECTURE.md is a map of folders and invariants held to nothing: it names no file
and no signature, so a refactor does not touch it.)"""

from __future__ import annotations

import re

from support import ROOT

from nodes import node_classes

README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_node_table_lists_every_registered_node():
    section = README[README.index("## The nodes"):]
    section = section[:section.index("\n## ", 4)]
    listed = re.findall(r"^\| \*\*(.+?)\*\* \|", section, flags=re.M)
    shown = [cls.define_schema().display_name for cls in node_classes()]
    assert sorted(listed) == sorted(shown)


def test_readme_stays_a_short_guide():
    assert len(README.splitlines()) <= 200
