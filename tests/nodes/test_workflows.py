"""Every shipped workflow JSON checked against the node schemas: node types exist, socket types
match across links, widget values are in range / in the options, links are consistent, and each
UI workflow (example_workflows/) has its API twin (example_workflows/api/) and a thumbnail.

Our nodes' schemas come from `define_schema()`; the core nodes used are described below from
ComfyUI 0.33 (nodes.py SaveImage / LoadImage / ImagePadForOutpaint, comfy_extras PreviewAny /
ImageStitch). The integration
test re-checks the same files against a live server's /object_info.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from support.workflows import UI_ONLY, WIDGETS, check_ui_workflow, check_value, schemas, ui_to_api

from tests.kit.templates import TEMPLATE_FILES, VIEW_METHOD

ROOT = Path(__file__).resolve().parents[2]
UI = sorted((ROOT / "example_workflows").glob("*.json"))
API = sorted((ROOT / "example_workflows" / "api").glob("*.json"))
pytestmark = pytest.mark.usefixtures("real_model_installed")


def ui_twin(api: Path) -> Path:
    """The UI template of an API workflow: its readable name (the template browser's title)."""
    return ROOT / "example_workflows" / f"{TEMPLATE_FILES[api.stem]}.json"


def test_every_example_has_an_api_twin() -> None:
    assert sorted(p.stem for p in UI) == sorted(TEMPLATE_FILES.values()) and len(UI) >= 4
    assert sorted(p.stem for p in API) == sorted(TEMPLATE_FILES)
    for name in ("example", "examples", "workflow", "workflows"):  # the template browser
        assert not list((ROOT / name).glob("*.json")), name  # globs these too (0.33)


@pytest.mark.parametrize("path", UI, ids=lambda p: p.stem)
def test_template_names_read_as_titles(path: Path) -> None:
    """The frontend shows the file name as the template's title: words, not snake_case."""
    name = path.stem
    assert not name[0].islower() and "_" not in name and len(name) <= 36, name
    assert " " in name and name not in TEMPLATE_FILES


def built_in_templates() -> list[Path]:
    """The API workflows whose loader loads a built-in model (nodes.loader.BUILT_IN: the nanos
    and dimoo-emoji, all 48 px)."""
    from nodes.loader import BUILT_IN

    return [p for p in API if any(n["class_type"] == "LADR_LoadDiMOOModel"
                                  and n["inputs"]["model_name"] in BUILT_IN
                                  for n in json.loads(p.read_text()).values())]


def test_every_template_titled_by_a_built_in_loads_one() -> None:
    built_in = {p.stem for p in built_in_templates()}
    titled = {stem for stem, title in TEMPLATE_FILES.items()
              if "(nano" in title or "(emoji" in title}
    assert titled and titled <= built_in


@pytest.mark.parametrize("path", built_in_templates(), ids=lambda p: p.stem)
def test_nano_results_are_shown_enlarged_and_saved_as_output(path: Path) -> None:
    """Every template on a built-in model shows its 48 px results at least 4x (ComfyUI's
    Upscale Image By, nearest-exact) in a Preview Image, while Save Image saves the pack's own
    output."""
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
    assert thumb.is_file(), f"missing {thumb.name}: run lab/workflows/thumbnails.py"
    with Image.open(thumb) as im:
        assert im.format == "JPEG" and im.width == im.height >= 256


@pytest.mark.parametrize("path", UI, ids=lambda p: p.stem)
def test_ui_workflow_matches_schemas(path: Path) -> None:
    check_ui_workflow(path)


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
            if spec.io_type in WIDGETS and spec.id not in node["inputs"]:
                assert spec.optional, f"{path.stem} {key}: widget {spec.id} missing"
                continue  # an optional widget left out runs at its default (denoise 1.0)
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
    from nodes.canvas import CanvasNode
    from nodes.sampler import DiMOOSampler

    kinds = {n["class_type"] for n in json.loads(path.read_text()).values()}
    assert "LADR_DiMOOSampler" not in kinds and "LADR_PaintOptions" not in kinds  # legacy
    for node in json.loads(path.read_text()).values():
        if node["class_type"] == "LADR_DiMOOSampler2":
            assert DiMOOSampler.validate_inputs(node["inputs"]["prompt"]) is True
        if node["class_type"] == "LADR_Canvas":
            i = node["inputs"]
            assert asyncio.run(CanvasNode.execute(i["width"], i["height"], i["batch_size"])).args
