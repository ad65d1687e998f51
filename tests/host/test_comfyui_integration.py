"""The pack inside a REAL ComfyUI server (skipped unless COMFYUI_PATH points at a checkout).

    COMFYUI_PATH=/work/comfyui COMFYUI_PYTHON=/work/comfy-venv/bin/python \
        .venv/bin/python -m pytest -q tests/host/test_comfyui_integration.py

Starts `main.py --cpu` on a free 127.0.0.1 port with a temporary --base-directory whose
custom_nodes/ links this repo and whose extra_model_paths.yaml adds a `lumina_dimoo:` folder
holding the tiny fixture checkpoint. Then: our nodes in /object_info (tooltips everywhere), every
example workflow checked against the live schemas, each API workflow queued (on the nano model if
shipped, else re-pointed at the fixture checkpoint) with images in /history and "ladr.step"
events over the websocket, bad inputs rejected at validation with our message while the server
keeps running, and Cancel mid-run followed by a run identical to a fresh one.
"""

from __future__ import annotations

import json
import urllib.request

import pytest
from support import ROOT
from support.comfy_server import COMFY, NANO_READY, api_workflow, http, run_workflow

SAMPLERS = ("LADR_DiMOOSampler2", "LADR_DiMOOSampler")  # DiMOO Sampler, its legacy twin

pytestmark = [pytest.mark.comfyui,
              pytest.mark.skipif(not COMFY, reason="set COMFYUI_PATH to a ComfyUI checkout")]


def ladr_policy_workflow() -> dict:
    """The text-to-image template with its rule on LADR and an LADR Policy (preset nano) as node
    "2" feeding it, as it shipped before the nano templates ran their best-measured strategy
    (lab/workflows/build_examples.py NANO_STRATEGY): the policy node taken from the saved 3e0f2f1
    template (tests/saved_workflows/)."""
    wf = api_workflow("ladr_nano_text_to_image")
    saved = json.loads((ROOT / "tests" / "saved_workflows" / "3e0f2f1" / "api" /
                        "ladr_nano_text_to_image.json").read_text())
    assert saved["2"]["class_type"] == "LADR_Policy" and "2" not in wf
    wf["2"] = saved["2"]
    rule = next(k for k, v in wf.items() if v["class_type"] == "LADR_SamplingRule")
    wf[rule]["inputs"].update(strategy="ladr", policy=["2", 0])
    return wf


def ours(info: dict) -> list[str]:
    """The nodes the host loaded from this pack (its own record of each node's module)."""
    return sorted(k for k, v in info.items()
                  if v.get("python_module", "").endswith("ComfyUI-LADR"))


def test_nodes_registered_with_tooltips_and_model_folder(server) -> None:
    port, _ = server
    _, info = http(port, "/object_info")
    help_pages = {p.parent.name for p in (ROOT / "web" / "docs").glob("*/en.md")}
    assert set(ours(info)) == help_pages, "every node the host loads has a help page, and no more"
    for node_id in ours(info):
        assert info[node_id]["category"].startswith("LADR")
        for group in ("required", "optional"):
            for name, spec in info[node_id]["input"].get(group, {}).items():
                assert spec[1].get("tooltip"), f"{node_id}.{name} has no tooltip"
    choices = info["LADR_LoadDiMOOModel"]["input"]["required"]["model_name"][1]["options"]
    assert choices[0] == "dimoo-nano (built-in)" and "tiny-fixture" in choices  # yaml key works
    for sampler in SAMPLERS:
        assert info[sampler]["input"]["required"]["seed"][1].get("control_after_generate")
    assert info["LADR_DiMOOSampler"]["deprecated"] and not info["LADR_DiMOOSampler2"].get(
        "deprecated")
    from nodes.loader import one_file_formats
    from nodes.policy import EXPERT_FIELDS

    policy = {**info["LADR_Policy"]["input"]["required"], **info["LADR_Policy"]["input"].get(
        "optional", {})}
    assert {n for n, spec in policy.items() if spec[1].get("advanced")} == set(EXPERT_FIELDS)
    loader_in = info["LADR_LoadDiMOOModel"]["input"]["required"]["model_name"][1]
    assert loader_in["ladr_files"] == one_file_formats()  # the web notice's one-file formats
    _, ext = http(port, "/extensions")
    assert "/extensions/ComfyUI-LADR/ladr_preview.js" in ext
    for node_id in ours(info):  # what the frontend's node help panel fetches first (web/docs/)
        req = f"http://127.0.0.1:{port}/extensions/ComfyUI-LADR/docs/{node_id}/en.md"
        with urllib.request.urlopen(req) as r:
            assert r.status == 200 and r.read().decode().startswith("# ")
    _, templates = http(port, "/workflow_templates")
    assert sorted(templates["ComfyUI-LADR"]) == sorted(
        p.stem for p in (ROOT / "example_workflows").glob("*.json"))


def test_help_pages_name_what_the_live_nodes_have(server) -> None:
    """Each help page against the live /object_info (support/help_pages.py): every input
    described, every socket it names on the node it names, the advanced inputs listed."""
    from support.help_pages import page_of, problems

    port, _ = server
    _, info = http(port, "/object_info")
    found = [p for n in ours(info) for p in problems(n, page_of(n).read_text(), info)]
    assert found == []


def test_help_pages_answer_a_frontend_in_any_language(server) -> None:
    """Frontend 1.49.6 asks docs/<node>/<locale>.md, then docs/<node>.md: the second address
    answers with the English page (nodes/host.py), so a French frontend shows it too."""
    import urllib.error

    from support.help_pages import page_of

    port, _ = server
    base = f"http://127.0.0.1:{port}/extensions/ComfyUI-LADR/docs"
    with urllib.request.urlopen(f"{base}/LADR_Policy.md") as r:
        assert r.status == 200 and r.read().decode() == page_of("LADR_Policy").read_text()
    for missing in ("LADR_Policy/fr.md", "LADR_NoSuchNode.md", "..%2Fdocs.md"):
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"{base}/{missing}")
        assert err.value.code == 404, missing


def _live_options(spec: list) -> list | None:
    """A COMBO's choices from /object_info: V1 nodes list them first, V3 nodes as "options"."""
    if isinstance(spec[0], list):
        return spec[0]
    return spec[1].get("options") if spec[0] == "COMBO" and len(spec) > 1 else None


@pytest.mark.parametrize("path", sorted((ROOT / "example_workflows" / "api").glob("*.json")),
                         ids=lambda p: p.stem)
def test_api_workflow_matches_the_live_schemas(server, path) -> None:
    """Every input of every node the host knows is one the live node has, in range / among its
    choices (Load Image's file among the input/ folder's, which the pack filled on load). The
    checkpoint name of the real-model examples is the one exception: the test host has none."""
    port, _ = server
    _, info = http(port, "/object_info")
    for key, node in json.loads(path.read_text()).items():
        if node["class_type"].startswith("Distributed"):  # not installed in this host
            continue
        live = info[node["class_type"]]["input"]
        specs = {**live.get("required", {}), **live.get("optional", {})}
        assert set(live.get("required", {})) <= set(node["inputs"]), (key, node["class_type"])
        for name, value in node["inputs"].items():
            assert name in specs, f"{path.stem} node {key}: {name} is not a live input"
            if isinstance(value, list):  # a link
                continue
            options = _live_options(specs[name])
            if options is not None and (name, value) != ("model_name", "Lumina-DiMOO"):
                assert value in options, f"{path.stem} node {key}: {name}={value!r}"
            bounds = specs[name][1] if len(specs[name]) > 1 else {}
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                assert bounds.get("min", value) <= value <= bounds.get("max", value), (key, name)


@pytest.mark.parametrize("name", ["ladr_nano_text_to_image", "ladr_vs_baseline_side_by_side",
                                  "ladr_batch_of_prompts", "ladr_emoji_text_to_image"])
def test_api_workflow_runs_with_images_and_step_events(server, name) -> None:
    port, _ = server
    wf = api_workflow(name)
    for node in wf.values():  # a seed no other test uses: ComfyUI would serve cached outputs
        if node["class_type"] in SAMPLERS:
            node["inputs"]["seed"] = 1000 + len(name)
    pid, msgs = run_workflow(port, wf)
    assert not [m for m in msgs if m["type"] == "execution_error"], msgs[-1]
    samplers = {k for k, n in wf.items() if n["class_type"] in SAMPLERS}
    steps = [m["data"] for m in msgs if m["type"] == "ladr.step"]
    assert {s["node"] for s in steps} == samplers
    for k in samplers:
        mine = [s for s in steps if s["node"] == k]
        assert mine[-1]["done"] and mine[-1]["stats"]["steps"] == len(mine) - 1
        progress = [s["progress"] for s in mine[:-1]]  # the bar: monotone, full at the end
        assert progress == sorted(progress) and progress[-1] == 1.0
        assert not any("preview" in s for s in mine)  # the picture: progress-bar frames only
    # one channel for the picture: ComfyUI's progress-bar preview, about one per step
    previews = [m for m in msgs if m["type"] == "preview"]
    assert len(previews) >= len(steps) - 2 * len(samplers), (len(previews), len(steps))
    _, hist = http(port, f"/history/{pid}")
    outputs = hist[pid]["outputs"]
    saves = [k for k, n in wf.items() if n["class_type"] == "SaveImage"]
    for k in saves:
        img = outputs[k]["images"][0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/view?filename={img['filename']}"
                                    f"&subfolder={img['subfolder']}&type=output") as r:
            assert r.read(8) == b"\x89PNG\r\n\x1a\n"
    if name == "ladr_batch_of_prompts":
        assert len(outputs[saves[0]]["images"]) == 4


def test_ladr_with_the_ml_cache_preset_runs_and_reports_its_saving(server) -> None:
    """LADR + ML-Cache Options (preset ladr) in the real host: the cache engages (its counts
    reach the host one call late, without a sync) and the sampler's stats show the saving."""
    port, _ = server
    wf = ladr_policy_workflow()
    key = str(max(int(k) for k in wf) + 1)  # a node id the workflow does not use
    wf[key] = {"class_type": "LADR_MLCacheOptions",
               "inputs": {"cache_ratio": 0.9, "warmup_ratio": 0.3, "refresh_interval": 5,
                          "preset": "ladr"}}
    wf["3"]["inputs"].update(cache=[key, 0], seed=777)
    pid, msgs = run_workflow(port, wf)
    assert not [m for m in msgs if m["type"] == "execution_error"], msgs[-1]
    final = [m["data"] for m in msgs if m["type"] == "ladr.step"][-1]
    assert final["done"] and final["stats"]["forwards_saved_pct"] > 0, final["stats"]
    _, hist = http(port, f"/history/{pid}")
    assert hist[pid]["outputs"]["5"]["images"]


@pytest.mark.parametrize(("mutate", "needle"), [
    (lambda wf: wf["1"]["inputs"].update(model_name="Lumina-DiMOO"), "models/lumina_dimoo"),
    (lambda wf: wf["3"]["inputs"].update(prompt=""), "prompt is empty"),
])
def test_bad_inputs_fail_validation_and_server_keeps_running(server, mutate, needle) -> None:
    port, _ = server
    wf = api_workflow("ladr_nano_text_to_image")
    mutate(wf)
    status, body = http(port, "/prompt", {"prompt": wf})
    assert status == 400
    assert needle in json.dumps(body["node_errors"]), body
    assert http(port, "/object_info/LADR_Policy")[0] == 200


CANVAS = "10"  # DiMOO Canvas in the nano text-to-image workflow


@pytest.mark.parametrize(("node", "inputs", "wrong", "needle"), [
    ("3", {"prompt": ""}, ["prompt"], "prompt is empty"),
    ("3", {"prompt": "  \n ", "one_prompt_per_line": True}, ["prompt"], "prompt is empty"),
    (CANVAS, {"width": 4096}, ["width", "height"], "width=4096 is bigger than max of 2048"),
    (CANVAS, {"height": -16}, ["width", "height"], "height=-16 is smaller than min of 0"),
    (CANVAS, {"width": float("inf")}, ["width"], "cannot convert float infinity"),
    ("3", {"cfg": 99.0}, ["cfg"], "bigger than max"),
    ("1", {"dtype": "fp8x"}, ["dtype"], "not in"),
    ("3", {"max_batch": -1}, ["max_batch"], "smaller than min"),
    ("3", {"max_batch": "two"}, ["max_batch"], "invalid literal"),
    ("1", {"model_name": "gone"}, ["model_name"], "gone"),
])
def test_each_mistake_is_refused_at_validation_naming_its_input(server, node, inputs, wrong,
                                                                needle) -> None:
    """ComfyUI attaches a validate_inputs failure to every input it names (nodes/validate.py):
    one message, on the one input that is wrong, or naming it (DiMOO Canvas names width and
    height: the web extension keeps it on the input it names, tests/web)."""
    port, _ = server
    wf = api_workflow("ladr_nano_text_to_image")
    wf[node]["inputs"].update(inputs)
    status, body = http(port, "/prompt", {"prompt": wf})
    assert status == 400
    assert list(body["node_errors"]) == [node], body["node_errors"]  # on that node alone
    errors = body["node_errors"][node]["errors"]
    assert [e["extra_info"]["input_name"] for e in errors] == wrong, errors
    assert all(needle in json.dumps(e) for e in errors), errors


NANO_GRID = ("DiMOO Canvas: {name}=50 is off the token grid of the connected model dimoo-nano "
             "(one token per 4 x 4 px); nearest valid {name}: 48 or 52")


@pytest.mark.parametrize("name", ["width", "height"])
def test_an_off_grid_size_is_refused_at_the_prompt_naming_its_input(server, name) -> None:
    """Issue 63: a canvas size nano does not draw (a hand-edited or API workflow: the widget
    steps on the connected model's grid) is refused by /prompt (400: nothing queued, so no
    model loads), one message from DiMOO Canvas naming the input and the connected model's grid
    alone. ComfyUI attaches it to width AND height (the validate_inputs names both); the web
    extension keeps it on the input it names (tests/web/test_web_artist_views.py). The next
    good prompt runs."""
    port, _ = server
    wf = api_workflow("ladr_nano_text_to_image")
    wf[CANVAS]["inputs"].update({"width": 48, "height": 48, name: 50})
    status, body = http(port, "/prompt", {"prompt": wf})
    assert status == 400, body
    assert list(body["node_errors"]) == [CANVAS], body["node_errors"]
    errors = body["node_errors"][CANVAS]["errors"]
    assert [(e["type"], e["extra_info"]["input_name"]) for e in errors] == [
        ("custom_validation_failed", "width"), ("custom_validation_failed", "height")], errors
    assert {e["details"].split(" - ", 1)[1] for e in errors} == {NANO_GRID.format(name=name)}
    wf[CANVAS]["inputs"][name] = 52  # on nano's grid (not on Lumina-DiMOO's 16 px)
    _, msgs = run_workflow(port, wf)
    assert [m["type"] for m in msgs if m["type"] in ("execution_success", "execution_error")] \
        == ["execution_success"], msgs


def test_a_linked_off_grid_size_is_refused_when_the_canvas_runs(server) -> None:
    """A size fed by a link has no value at validation: DiMOO Canvas refuses it when it runs
    (the backstop), naming the input and the connected grid. Not before the model loads:
    ComfyUI 0.33 runs Load DiMOO Model before the link's source (here an Int node), so the
    canvas is not ready until after the load."""
    port, _ = server
    wf = api_workflow("ladr_nano_text_to_image")
    wf["90"] = {"class_type": "PrimitiveInt", "inputs": {"value": 50}}
    wf[CANVAS]["inputs"].update(width=["90", 0], height=48)
    _, msgs = run_workflow(port, wf)
    errors = [m["data"] for m in msgs if m["type"] == "execution_error"]
    assert [e["node_id"] for e in errors] == [CANVAS], errors
    assert errors[0]["exception_message"].rstrip() == NANO_GRID.format(name="width"), errors


def test_a_missing_prompt_input_gets_comfyuis_own_message(server) -> None:
    """A workflow saved without the prompt input: ComfyUI's 'Required input is missing' on
    prompt, not a Python TypeError from validate_inputs."""
    port, _ = server
    wf = api_workflow("ladr_nano_text_to_image")
    del wf["3"]["inputs"]["prompt"]
    status, body = http(port, "/prompt", {"prompt": wf})
    assert status == 400
    errors = body["node_errors"]["3"]["errors"]
    assert [(e["type"], e["extra_info"]["input_name"]) for e in errors] == [
        ("required_input_missing", "prompt")], errors
    assert "missing 1 required positional argument" not in json.dumps(body)


def test_policy_combination_fails_once_at_execution_naming_the_field(server) -> None:
    """Phase bounds out of order span two widgets: one message, when the policy node runs."""
    port, _ = server
    wf = ladr_policy_workflow()
    wf["2"]["inputs"].update(preset="custom", exploration_end=0.9)
    _, msgs = run_workflow(port, wf)
    errors = [m["data"] for m in msgs if m["type"] == "execution_error"]
    assert len(errors) == 1 and errors[0]["node_id"] == "2"
    assert "phase_bounds" in errors[0]["exception_message"]


@pytest.mark.skipif(not NANO_READY, reason="needs the shipped nano model")
def test_auto_defaults_run_and_the_preview_keeps_the_decoded_colours(server) -> None:
    """width/height 0 and cfg -1 = the checkpoint's defaults; the last step's live preview has
    the saved image's colours on every object, and the final one is the saved image."""
    from io import BytesIO

    import numpy as np
    from PIL import Image

    port, _ = server
    wf = api_workflow("ladr_nano_text_to_image")
    wf[CANVAS]["inputs"].update(width=0, height=0)
    wf["3"]["inputs"].update(cfg=-1.0, seed=4243, prompt="a red circle to the left of a blue "
                             "square")
    pid, msgs = run_workflow(port, wf)
    assert not [m for m in msgs if m["type"] == "execution_error"], msgs[-1]
    # the last step's preview and the final one (the real decode), both enlarged 5x (nearest)
    *_, step, final = [np.asarray(Image.open(BytesIO(m["data"]["image"])).convert("RGB"))
                       for m in msgs if m["type"] == "preview"]
    assert step.shape == final.shape == (240, 240, 3)
    preview, final = step[2::5, 2::5], final[2::5, 2::5].astype(float) / 255
    _, hist = http(port, f"/history/{pid}")
    img = hist[pid]["outputs"]["5"]["images"][0]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/view?filename={img['filename']}"
                                f"&subfolder={img['subfolder']}&type=output") as r:
        saved = np.asarray(Image.open(BytesIO(r.read())).convert("RGB")).astype(float) / 255
    assert saved.shape == (48, 48, 3) and preview.shape == saved.shape
    preview = preview.astype(float) / 255
    background = np.array([240, 240, 235]) / 255
    shape = np.abs(saved - background).max(-1) > 0.25
    for name, channel in (("red", 0), ("blue", 2)):  # each object by its dominant channel
        mask = shape & (saved.argmax(-1) == channel)
        assert mask.sum() >= 16, f"no {name} object drawn"
        error = np.abs(saved[mask].mean(0) - preview[mask].mean(0)).max()
        assert error < 0.08, (name, saved[mask].mean(0), preview[mask].mean(0))
    assert np.abs(final - saved).max(-1).mean() < 3 / 255  # JPEG of the saved pixels


def test_cancel_mid_run_then_next_run_equals_a_fresh_one(server) -> None:
    port, _ = server
    wf = ladr_policy_workflow()
    # steps = the nano preset's own T, so "custom" with its values below is the same strategy
    wf["3"]["inputs"].update(seed=777, steps=128)

    def cancel_on_second_step(m: dict) -> None:
        if m["type"] == "ladr.step" and m["data"]["step"] == 2:
            http(port, "/interrupt", {})

    _, msgs = run_workflow(port, wf, cancel_on_second_step)
    assert msgs[-1]["type"] == "execution_interrupted"
    pid_a, msgs_a = run_workflow(port, wf)  # the run right after the cancel
    # A fresh computation of the same thing: "custom" with the nano preset's values is the same
    # LADRPolicy, but a different graph, so ComfyUI cannot serve cached outputs.
    assert wf["2"]["inputs"]["preset"] == "nano"
    wf["2"]["inputs"].update(preset="custom", selection="gumbel", rescue_token="argmax",
                             seen_only=True, **{f"{k}_{p}": v for k, v in (("tau", 0.9),
                             ("alpha", 1.0)) for p in ("exploration", "structure", "refinement")})
    pid_b, msgs_b = run_workflow(port, wf)
    for msgs_x in (msgs_a, msgs_b):
        assert [m for m in msgs_x if m["type"] == "ladr.step"], "served from ComfyUI's cache"
    _, ha = http(port, f"/history/{pid_a}")
    _, hb = http(port, f"/history/{pid_b}")
    import re

    texts = [re.sub(r"\d+\.\d\d s\b", "_ s", h[p]["outputs"]["6"]["text"][0])
             for h, p in ((ha, pid_a), (hb, pid_b))]
    assert texts[0] == texts[1]  # same steps / NFE / forwards (timings differ)
    imgs = []
    for h, pid in ((ha, pid_a), (hb, pid_b)):
        img = h[pid]["outputs"]["5"]["images"][0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/view?filename={img['filename']}"
                                    f"&subfolder={img['subfolder']}&type=output") as r:
            imgs.append(r.read())
    from io import BytesIO

    from PIL import Image

    pa, pb = (Image.open(BytesIO(b)).convert("RGB").tobytes() for b in imgs)
    assert pa == pb


def _pixels(port: int, image: dict) -> bytes:
    from io import BytesIO

    from PIL import Image

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/view?filename={image['filename']}"
                                f"&subfolder={image['subfolder']}&type=output") as r:
        return Image.open(BytesIO(r.read())).convert("RGB").tobytes()


def test_a_prompt_list_rolling_through_one_slot_gives_the_batchs_images_in_order(server) -> None:
    """Four prompts with max_batch 1 (each image alone, the next joins when it finishes) and
    with max_batch 3 (a rolling batch): the same four images, in prompt order; the bar rises to
    1 and the stats say how many images were in flight."""
    port, _ = server
    runs = {}
    for flying in (1, 3):
        wf = api_workflow("ladr_batch_of_prompts")
        wf["3"]["inputs"].update(seed=4242, max_batch=flying)
        pid, msgs = run_workflow(port, wf)
        assert not [m for m in msgs if m["type"] == "execution_error"], msgs[-1]
        steps = [m["data"] for m in msgs if m["type"] == "ladr.step"]
        progress = [s["progress"] for s in steps[:-1]]
        assert progress == sorted(progress) and progress[-1] == 1.0
        assert steps[-1]["stats"]["images"] == 4 and steps[-1]["stats"]["in_flight"] == flying
        _, hist = http(port, f"/history/{pid}")
        runs[flying] = [_pixels(port, im) for im in hist[pid]["outputs"]["5"]["images"]]
    assert len(runs[1]) == 4 and runs[1] == runs[3]
    assert len(set(runs[1])) == 4  # four prompts, four different images


def test_real_model_workflow_without_checkpoint_is_a_validation_error(server) -> None:
    port, _ = server
    wf = json.loads((ROOT / "example_workflows" / "api" / "ladr_dimoo_1024_real_model.json").read_text())
    status, body = http(port, "/prompt", {"prompt": wf})
    assert status == 400
    errors = json.dumps(body["node_errors"])
    assert "Lumina-DiMOO" in errors and "models/lumina_dimoo/Lumina-DiMOO" in errors
