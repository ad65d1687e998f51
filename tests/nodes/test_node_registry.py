"""The pack's nodes as a user meets them, derived from the registry (nodes.register_node), with
no list of node ids: every node class written in nodes/ is in the menu, once, in the order its
module gives it; each has its help page where ComfyUI serves it and a row in README's node
table; and every node a saved workflow may hold still loads with its widgets
(tests/saved_workflows/every_node_*.json: the nodes and widgets as an earlier version shipped
them)."""

from __future__ import annotations

import importlib.util
import inspect
import json
import re
import sys

import pytest
from support import ROOT
from support.workflows import WIDGETS, check_value

import nodes
from nodes import node_classes, register_node

SAVED = sorted((ROOT / "tests" / "saved_workflows").glob("every_node_*.json"))
README = (ROOT / "README.md").read_text(encoding="utf-8")


def web_directory():
    """The folder ComfyUI serves the pack's web files from: WEB_DIRECTORY of its entry module
    (importing it is cheap: it imports nothing of the pack)."""
    spec = importlib.util.spec_from_file_location("pack_entry", ROOT / "__init__.py")
    entry = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(entry)
    return ROOT / entry.WEB_DIRECTORY


def test_every_node_class_written_in_the_package_is_in_the_menu_once() -> None:
    """A node class whose module forgot `@register_node` would be missing from ComfyUI's menu."""
    listed = node_classes()
    written = {cls for name, module in list(sys.modules.items())
               if name.startswith(f"{nodes.__name__}.")
               for cls in vars(module).values()
               if inspect.isclass(cls) and cls.__module__ == name
               and callable(getattr(cls, "define_schema", None))}
    assert written and written == set(listed) and len(listed) == len(set(listed))
    ids = [c.define_schema().node_id for c in listed]
    assert len(ids) == len(set(ids)), ids


def test_the_menu_order_is_stable_and_the_entry_point_gives_it() -> None:
    import asyncio

    first = [c.define_schema().node_id for c in node_classes()]
    assert first[:2] == ["LADR_LoadDiMOOModel", "LADR_DiMOOSampler2"]  # load, then sample
    ext = nodes.extension_class()()
    assert [c.define_schema().node_id for c in asyncio.run(ext.get_node_list())] == first


def test_a_taken_menu_position_is_refused_naming_both() -> None:
    loader = node_classes()[0]  # at menu position 10 (nodes/loader.py)

    class Scratch:
        pass

    with pytest.raises(ValueError, match=rf"^{__name__}\..*Scratch: menu position 10 is "
                                         rf"already held by nodes\.loader\.{loader.__name__}; "):
        register_node(10)(Scratch)
    assert node_classes()[0] is loader  # refused: nothing changed


def test_two_nodes_under_one_node_id_are_refused(monkeypatch) -> None:
    """ComfyUI would silently keep one of them: the registry says so instead."""
    loader = node_classes()[0]
    monkeypatch.setattr(nodes, "_REGISTERED", dict(nodes._REGISTERED))  # forgets Copy after

    class Copy(loader):  # type: ignore[misc, valid-type]
        pass

    register_node(max(nodes._REGISTERED) + 10)(Copy)
    with pytest.raises(ValueError, match=r"^node_id 'LADR_LoadDiMOOModel' is registered by both "
                                         r"LoadDiMOOModel and .*Copy; a node_id names one node"):
        node_classes()


@pytest.mark.parametrize("node", node_classes(), ids=lambda c: c.define_schema().node_id)
def test_every_node_has_a_help_page_and_a_readme_row(node: type) -> None:
    schema = node.define_schema()
    page = web_directory() / "docs" / schema.node_id / "en.md"  # the frontend asks here first
    assert page.is_file() and page.read_text(encoding="utf-8").strip(), page
    section = README[README.index("## The nodes"):]
    section = section[:section.index("\n## ", 4)]
    rows = re.findall(r"^\| \*\*(.+?)\*\* \|", section, flags=re.M)
    assert schema.display_name in rows, f"README's node table has no row for {schema.display_name}"


@pytest.mark.parametrize("saved", SAVED, ids=lambda p: p.stem)
def test_every_node_an_earlier_version_shipped_still_loads_with_its_widgets(saved) -> None:
    """A node_id or widget name that changed would break every workflow saved with it."""
    shipped = json.loads(saved.read_text())["nodes"]
    today = {c.define_schema().node_id: c.define_schema() for c in node_classes()}
    assert len(shipped) >= 19 and set(shipped) <= set(today), set(shipped) - set(today)
    for node_id, widgets in shipped.items():
        inputs = {i.id: i for i in today[node_id].inputs}
        for name, value in widgets.items():
            assert name in inputs and inputs[name].io_type in WIDGETS, f"{node_id}.{name}"
            check_value(f"{saved.stem} {node_id}.{name}", inputs[name], value)
