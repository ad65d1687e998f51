"""Checking workflow files against the node schemas (the pack's own from define_schema(), the
core and ComfyUI-Distributed nodes the examples use described here from their sources), shared
by the tests of today's examples and of the earlier version's saved workflows.

Our nodes' schemas come from `define_schema()`; the core nodes used are described below from
ComfyUI 0.33 (nodes.py SaveImage / LoadImage / ImagePadForOutpaint / ImageScaleBy, comfy_extras
PreviewAny / ImageStitch).
"""

from __future__ import annotations

import json
from pathlib import Path

from nodes import node_classes

from . import ROOT

WIDGETS = {"INT", "FLOAT", "STRING", "BOOLEAN", "COMBO"}


class W:
    """Minimal widget spec for a core node input."""

    def __init__(self, id: str, io_type: str, options=None, min=None, max=None,
                 optional: bool = False) -> None:
        self.id, self.io_type, self.options, self.min, self.max = id, io_type, options, min, max
        self.optional, self.control_after_generate = optional, None


CORE = {
    "SaveImage": ([W("images", "IMAGE"), W("filename_prefix", "STRING")], []),
    "PreviewImage": ([W("images", "IMAGE")], []),
    "ImageScaleBy": ([W("image", "IMAGE"), W("upscale_method", "COMBO", ["nearest-exact",
                      "bilinear", "area", "bicubic", "lanczos"]),
                      W("scale_by", "FLOAT", min=0.01, max=8.0)], ["IMAGE"]),
    # the frontend's own Markdown note (never sent to the server: no API twin)
    "MarkdownNote": ([W("text", "STRING")], []),
    "PreviewAny": ([W("source", "*")], ["STRING"]),
    "ImageStitch": ([W("image1", "IMAGE"), W("direction", "COMBO", ["right", "down", "left", "up"]),
                     W("match_image_size", "BOOLEAN"), W("spacing_width", "INT", min=0, max=1024),
                     W("spacing_color", "COMBO", ["white", "black", "red", "green", "blue"]),
                     W("image2", "IMAGE", optional=True)], ["IMAGE"]),
}
# ComfyUI-Distributed 1.4 (robertvoy/ComfyUI-Distributed nodes/utilities.py, nodes/collector.py);
# the frontend gives an INT input named "seed" a control_after_generate widget.
_SEED = W("seed", "INT", min=0, max=1125899906842624)
_SEED.control_after_generate = True
# Load Image (nodes.py LoadImage): the file COMBO lists ComfyUI's input/ folder (the examples'
# files are in example_workflows/inputs/); the frontend adds an upload button whose widget value
# ("image") is saved in the UI format only (UI_ONLY: no API input). Pad Image for Outpainting
# (nodes.py ImagePadForOutpaint): MAX_RESOLUTION 16384.
UI_ONLY = "UI_ONLY"
INPUT_FILES = sorted(p.name for p in (ROOT / "example_workflows" / "inputs").glob("*.png"))
_PAD = [W(side, "INT", min=0, max=16384) for side in ("left", "top", "right", "bottom")]
CORE.update({
    "LoadImage": ([W("image", "COMBO", INPUT_FILES), W("upload", UI_ONLY)], ["IMAGE", "MASK"]),
    "ImagePadForOutpaint": ([W("image", "IMAGE"), *_PAD, W("feathering", "INT", min=0,
                                                           max=16384)], ["IMAGE", "MASK"]),
})
CORE.update({
    "DistributedSeed": ([_SEED], ["INT"]),
    "DistributedCollector": ([W("images", "IMAGE"), W("load_balance", "BOOLEAN"),
                              W("audio", "AUDIO", optional=True)], ["IMAGE", "AUDIO"]),
})


def schemas() -> dict[str, tuple[list, list[str]]]:
    out = dict(CORE)
    for cls in node_classes():
        s = cls.define_schema()
        out[s.node_id] = (list(s.inputs), [o.io_type for o in s.outputs])
    return out


def check_value(where: str, spec, value) -> None:
    t = spec.io_type
    if t == UI_ONLY:  # Load Image's upload button
        assert value == "image", f"{where}: {value!r}"
        return
    if t == "COMBO":
        assert value in spec.options, f"{where}: {value!r} not in {spec.options}"
        return
    kinds = {"INT": int, "FLOAT": (int, float), "STRING": str, "BOOLEAN": bool}
    assert isinstance(value, kinds[t]) and (t == "BOOLEAN" or not isinstance(value, bool)), \
        f"{where}: {value!r} is not {t}"
    if t not in ("INT", "FLOAT"):  # only numbers have a range
        return
    if spec.min is not None:
        assert value >= spec.min, f"{where}: {value} < min {spec.min}"
    if spec.max is not None:
        assert value <= spec.max, f"{where}: {value} > max {spec.max}"
    if t == "INT" and getattr(spec, "step", None) and spec.id in ("width", "height"):
        assert value % spec.step == 0, f"{where}: {value} not a multiple of {spec.step}"


FRONTEND_ONLY = {"MarkdownNote"}


def check_ui_workflow(path: Path) -> None:
    """A UI workflow against the schemas: node types, socket types across links, widget values
    in range or among the options, links consistent."""
    wf, sch = json.loads(path.read_text()), schemas()
    nodes = {n["id"]: n for n in wf["nodes"]}
    assert wf["last_node_id"] == max(nodes) and wf["last_link_id"] == len(wf["links"])
    links = {lk[0]: lk for lk in wf["links"]}
    for n in wf["nodes"]:
        assert n["type"] in sch, f"unknown node type {n['type']}"
        inputs, outputs = sch[n["type"]]
        sockets = [i for i in inputs if i.io_type not in WIDGETS | {UI_ONLY}]
        widgets = [i for i in inputs if i.io_type in WIDGETS | {UI_ONLY}]
        fed = [(slot, i) for slot, i in enumerate(n["inputs"]) if "widget" in i]
        socket_ins = [i for i in n["inputs"] if "widget" not in i]
        later = sockets[len(socket_ins):]  # sockets appended after it was saved: optional,
        sockets = sockets[:len(socket_ins)]  # absent from its slots until the node is re-made
        assert all(s.optional for s in later), (n["type"], [s.id for s in later])
        assert [i["name"] for i in socket_ins] == [s.id for s in sockets], n["type"]
        for slot, ui_in in fed:  # a widget fed by a link (Distributed Seed -> seed)
            spec = next(w for w in widgets if w.id == ui_in["widget"]["name"] == ui_in["name"])
            lk = links[ui_in["link"]]
            assert lk[3:5] == [n["id"], slot] and lk[5] == spec.io_type, (n["type"], spec.id)
            assert sch[nodes[lk[1]]["type"]][1][lk[2]] == spec.io_type
        for slot, (ui_in, spec) in enumerate(zip(socket_ins, sockets, strict=True)):
            if ui_in["link"] is None:
                assert spec.optional, f"node {n['id']}: required input {spec.id} unlinked"
                continue
            lk = links[ui_in["link"]]
            src_type = sch[nodes[lk[1]]["type"]][1][lk[2]]
            assert lk[3:5] == [n["id"], slot] and lk[5] == src_type
            assert spec.io_type in ("*", src_type), f"{n['type']}.{spec.id} <- {src_type}"
            assert lk[0] in nodes[lk[1]]["outputs"][lk[2]]["links"]
        values = list(n["widgets_values"])
        for spec in widgets:
            if not values and spec.optional:  # appended later: the frontend gives its default
                continue
            check_value(f"{path.stem} node {n['id']} {spec.id}", spec, values.pop(0))
            if getattr(spec, "control_after_generate", None):  # INT / COMBO only
                assert values.pop(0) in ("fixed", "increment", "decrement", "randomize")
        assert values == [], f"node {n['id']}: extra widget values {values}"


def ui_to_api(ui: dict) -> dict:
    """Independent conversion of a UI workflow to API format, using the schemas."""
    sch, out = schemas(), {}
    links = {lk[0]: lk for lk in ui["links"]}
    for n in ui["nodes"]:
        if n["type"] in FRONTEND_ONLY:
            continue
        inputs: dict = {}
        values = list(n["widgets_values"])
        for spec in sch[n["type"]][0]:
            if spec.io_type in WIDGETS | {UI_ONLY} and not values and spec.optional:
                continue  # a widget appended later: absent, as the frontend queues it
            if spec.io_type == UI_ONLY:
                values.pop(0)
            elif spec.io_type in WIDGETS:
                inputs[spec.id] = values.pop(0)
                if getattr(spec, "control_after_generate", None):
                    values.pop(0)
        for ui_in in n["inputs"]:
            if ui_in["link"] is not None:
                lk = links[ui_in["link"]]
                inputs[ui_in["name"]] = [str(lk[1]), lk[2]]
        out[str(n["id"])] = {"class_type": n["type"], "inputs": inputs}
    return out
