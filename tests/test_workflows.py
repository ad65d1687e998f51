"""Every shipped workflow JSON checked against the node schemas: node types exist, socket types
match across links, widget values are in range / in the options, links are consistent, and each
UI workflow (example_workflows/) has its API twin (workflows/api/) and a thumbnail.

Our nodes' schemas come from `define_schema()`; the core nodes used are described below from
ComfyUI 0.33 (nodes.py SaveImage / LoadImage / ImagePadForOutpaint, comfy_extras PreviewAny /
ImageStitch). The integration
test re-checks the same files against a live server's /object_info.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from nodes import node_classes
from workflows import queue_prompts
from workflows.template_extras import TEMPLATE_FILES, VIEW_METHOD

ROOT = Path(__file__).resolve().parents[1]
UI = sorted((ROOT / "example_workflows").glob("*.json"))
API = sorted((ROOT / "workflows" / "api").glob("*.json"))
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
# files are in workflows/inputs/); the frontend adds an upload button whose widget value
# ("image") is saved in the UI format only (UI_ONLY: no API input). Pad Image for Outpainting
# (nodes.py ImagePadForOutpaint): MAX_RESOLUTION 16384.
UI_ONLY = "UI_ONLY"
INPUT_FILES = sorted(p.name for p in (ROOT / "workflows" / "inputs").glob("*.png"))
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


@pytest.fixture(autouse=True)
def real_model_installed(tmp_path, monkeypatch) -> None:
    """As on a machine where the user put the real checkpoint at models/lumina_dimoo/."""
    (tmp_path / "Lumina-DiMOO").mkdir()
    (tmp_path / "Lumina-DiMOO" / "config.json").write_text("{}")
    monkeypatch.setenv("LADR_MODELS_DIR", str(tmp_path))


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


def ui_twin(api: Path) -> Path:
    """The UI template of an API workflow: its readable name (the template browser's title)."""
    return ROOT / "example_workflows" / f"{TEMPLATE_FILES[api.stem]}.json"


def test_every_example_has_an_api_twin() -> None:
    assert sorted(p.stem for p in UI) == sorted(TEMPLATE_FILES.values()) and len(UI) >= 4
    assert sorted(p.stem for p in API) == sorted(TEMPLATE_FILES)
    assert not list((ROOT / "workflows").glob("*.json"))  # the template browser globs those


@pytest.mark.parametrize("path", UI, ids=lambda p: p.stem)
def test_template_names_read_as_titles(path: Path) -> None:
    """The frontend shows the file name as the template's title: words, not snake_case."""
    name = path.stem
    assert not name[0].islower() and "_" not in name and len(name) <= 36, name
    assert " " in name and name not in TEMPLATE_FILES


@pytest.mark.parametrize("path", [p for p in API if "nano" in TEMPLATE_FILES[p.stem]],
                         ids=lambda p: p.stem)
def test_nano_results_are_shown_enlarged_and_saved_as_output(path: Path) -> None:
    """Every nano template shows its 48 px results at least 4x (ComfyUI's Upscale Image By,
    nearest-exact) in a Preview Image, while Save Image saves the pack's own output."""
    wf = json.loads(path.read_text())
    views = [(k, n) for k, n in wf.items() if n["class_type"] == "PreviewImage"]
    assert views, path.stem
    for _, view in views:
        scale = wf[view["inputs"]["images"][0]]
        assert scale["class_type"] == "ImageScaleBy"
        assert scale["inputs"]["upscale_method"] == VIEW_METHOD
        assert scale["inputs"]["scale_by"] >= 4 and float(scale["inputs"]["scale_by"]).is_integer()
    for save in (n for n in wf.values() if n["class_type"] == "SaveImage"):
        src = wf[save["inputs"]["images"][0]]["class_type"]
        assert src in ("LADR_DiMOOVQDecode", "ImageStitch", "DistributedCollector"), src


@pytest.mark.parametrize("path", UI, ids=lambda p: p.stem)
def test_every_example_has_a_square_jpeg_thumbnail(path: Path) -> None:
    """Browse Templates fetches <name>.jpg beside the JSON and shows it square."""
    from PIL import Image

    thumb = path.with_suffix(".jpg")
    assert thumb.is_file(), f"missing {thumb.name}: run workflows/thumbnails.py"
    with Image.open(thumb) as im:
        assert im.format == "JPEG" and im.width == im.height >= 256


@pytest.mark.parametrize("path", UI, ids=lambda p: p.stem)
def test_ui_workflow_matches_schemas(path: Path) -> None:
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


@pytest.mark.parametrize("path", API, ids=lambda p: p.stem)
def test_api_workflow_is_the_ui_workflow_and_valid(path: Path) -> None:
    api = json.loads(path.read_text())
    ui = json.loads(ui_twin(path).read_text())
    stripped = {k: {"class_type": v["class_type"], "inputs": v["inputs"]} for k, v in api.items()}
    assert stripped == ui_to_api(ui)
    sch = schemas()
    for key, node in api.items():
        for spec in sch[node["class_type"]][0]:
            if spec.io_type == UI_ONLY:
                assert spec.id not in node["inputs"]
                continue
            value = node["inputs"][spec.id] if spec.io_type in WIDGETS else None
            if isinstance(value, list):  # a widget fed by a link
                assert sch[api[value[0]]["class_type"]][1][value[1]] == spec.io_type
            elif spec.io_type in WIDGETS:
                check_value(f"{path.stem} {key}.{spec.id}", spec, value)
            elif not spec.optional:
                src, slot = node["inputs"][spec.id]
                assert src in api and slot < len(sch[api[src]["class_type"]][1])


@pytest.mark.parametrize("path", API, ids=lambda p: p.stem)
def test_sampler_validation_accepts_every_shipped_workflow(path: Path) -> None:
    from nodes.sampler import DiMOOSampler

    for node in json.loads(path.read_text()).values():
        if node["class_type"] == "LADR_DiMOOSampler":
            i = node["inputs"]
            assert DiMOOSampler.validate_inputs(i["prompt"]) is True


def test_workflow_files_are_up_to_date_with_the_builder() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "workflows" / "build_examples.py"),
                          "--check"], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


def test_queue_script_puts_each_prompt_and_seed_into_the_samplers() -> None:
    wf = json.loads((ROOT / "workflows" / "api" / "ladr_vs_baseline_side_by_side.json").read_text())
    batch = queue_prompts.jobs(wf, ["a cat", "a dog"], seed=10)
    assert len(batch) == 2
    samplers = [k for k, v in wf.items() if v["class_type"] == "LADR_DiMOOSampler"]
    assert len(samplers) == 2
    for i, (job, text) in enumerate(zip(batch, ["a cat", "a dog"], strict=True)):
        for k in samplers:
            assert job[k]["inputs"]["prompt"] == text and job[k]["inputs"]["seed"] == 10 + i
    assert wf[samplers[0]]["inputs"]["prompt"] != "a cat"  # the template is not mutated
    assert queue_prompts.jobs(wf, [], None) == [wf]
    with pytest.raises(ValueError, match="no LADR_DiMOOSampler"):
        queue_prompts.jobs({"1": {"class_type": "SaveImage", "inputs": {}}}, ["x"], None)
