"""A node's help page checked against the node as the server describes it (issue 63).

`info` is shaped as ComfyUI's /object_info: node id -> {"display_name", "input": {"required",
"optional"}: name -> [type, options], "output_name"}. It comes from the live server
(tests/host, tests/web) or from the node registry's schemas (`object_info_of`), never from a
hand list. `problems(node_id, page, info)` lists what a page says wrong:

* an input of the node that the page does not name in backticks;
* a socket or widget the page names that the node it points at does not have: "`x` input",
  "`x` output", "`x` widget" or "`x` socket" belongs to the page's own node, unless a node's
  display name owns it ("DiMOO Sampling Rule's `policy` input", "the `rule` input of **DiMOO
  Ask**"); a possessive that names no node ("the sampler's `policy` input") is a problem too;
* the advanced inputs (V3 ``advanced=True``): a page whose node has some lists exactly those on
  its "**Advanced inputs**:" line; a page whose node has none has no such line.

The help page is web/docs/<node_id>/en.md, the first address frontend 1.49.6 asks for
(`/extensions/<pack>/docs/<node_id>/<locale>.md`, then `<node_id>.md`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from . import ROOT

DOCS = ROOT / "web" / "docs"
WIDGET_TYPES = {"INT", "FLOAT", "STRING", "BOOLEAN", "COMBO"}
KIND = r"(?P<kind>input|output|widget|socket)s?\b"
NAMED = re.compile(r"`(?P<name>[A-Za-z_][A-Za-z0-9_]*)`(?: \([^)]*\))? " + KIND)
OWNER_BEFORE = re.compile(r"(?P<owner>[\w()., -]+?)\**'s (?:optional )?$")
OWNER_AFTER = re.compile(r"^ of (?:the node )?\**(?P<owner>[^*\n]+)")
SELF = {"its", "the node's", "this node's"}
ADVANCED_LINE = re.compile(r"\*\*Advanced inputs\*\*:(?P<list>[^\n]*)")


def page_of(node_id: str) -> Path:
    """Where the help page of `node_id` lives."""
    return DOCS / node_id / "en.md"


def object_info_of(schemas: list[Any]) -> dict[str, dict]:
    """/object_info's shape from V3 schemas (`define_schema()` of the registered nodes), as
    comfy_api's get_v1_info builds it: inputs by group with their `advanced` flag, the output
    names (display name, else id)."""
    info: dict[str, dict] = {}
    for s in schemas:
        groups: dict[str, dict] = {"required": {}, "optional": {}}
        for i in s.inputs:
            options = {"advanced": True} if getattr(i, "advanced", None) else {}
            groups["optional" if i.optional else "required"][i.id] = [i.io_type, options]
        info[s.node_id] = {"display_name": s.display_name, "input": groups,
                           "output_name": [o.display_name or o.id for o in s.outputs]}
    return info


def inputs_of(entry: dict) -> dict[str, list]:
    """A node's inputs (required and optional; hidden ones are not the user's)."""
    return {**entry["input"].get("required", {}), **entry["input"].get("optional", {})}


def _is_widget(spec: list) -> bool:
    return isinstance(spec[0], list) or spec[0] in WIDGET_TYPES


def _owner(text: str, start: int, end: int, node_id: str, names: dict[str, str]) -> str | None:
    """The node a named socket belongs to: a display name right before ("X's") or after
    ("of X"), else the page's own node; None when a possessive names no node."""
    before = OWNER_BEFORE.search(text[max(0, start - 80):start])
    if before:
        owner = before.group("owner").strip(" *")
        known = [n for n in names if owner.endswith(n)]
        if known:
            return names[max(known, key=len)]
        words = owner.split()
        return node_id if " ".join(words[-2:]) in SELF or words[-1:] == ["its"] else None
    after = OWNER_AFTER.search(text[end:end + 80])
    known = [n for n in names if after and after.group("owner").startswith(n)]
    if known:
        return names[max(known, key=len)]
    return node_id


def problems(node_id: str, page: str, info: dict[str, dict]) -> list[str]:
    """What the help page `page` of `node_id` says that the node description `info` does not."""
    entry, out = info[node_id], []
    text = re.sub(r"[ \t]*\n[ \t]*(?!\n|- |#)", " ", page)  # a paragraph on one line
    names = {e["display_name"]: k for k, e in info.items() if e.get("display_name")}
    mine = inputs_of(entry)
    out += [f"{node_id}: input `{n}` is not described" for n in mine if f"`{n}`" not in page]
    for m in NAMED.finditer(text):
        name, kind = m.group("name"), m.group("kind")
        owner = _owner(text, m.start(), m.end(), node_id, names)
        said = f"{node_id}: `{name}` {kind} ({text[max(0, m.start() - 40):m.end()]!r})"
        if owner is None:
            out.append(f"{said}: name the node it is on")
            continue
        ins, outs = inputs_of(info[owner]), info[owner].get("output_name", [])
        ok = {"input": name in ins, "output": name in outs, "socket": name in ins or
              name in outs, "widget": name in ins and _is_widget(ins.get(name, [None]))}[kind]
        if not ok:
            out.append(f"{said}: {info[owner]['display_name']} has no such {kind}")
    advanced = {n for n, spec in mine.items() if len(spec) > 1 and spec[1].get("advanced")}
    lines = ADVANCED_LINE.findall(text)
    listed = set(re.findall(r"`(\w+)`", " ".join(lines)))
    if advanced and listed != advanced:
        out.append(f"{node_id}: the **Advanced inputs**: line lists {sorted(listed)}, "
                   f"the node marks {sorted(advanced)}")
    if not advanced and (lines or re.search(r"\badvanced\*? inputs?\b", text, re.I)):
        out.append(f"{node_id}: the page speaks of advanced inputs; the node marks none")
    return out
