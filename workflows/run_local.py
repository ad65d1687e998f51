"""Run an API-format workflow WITHOUT a ComfyUI server (our nodes + tiny stand-ins for the three
core nodes the examples use, and ComfyUI-Distributed's Seed / Collector as on a lone master), and
draw the Browse-Templates thumbnails from the results.

    .venv/bin/python workflows/run_local.py workflows/api/ladr_nano_text_to_image.json
    .venv/bin/python workflows/run_local.py --thumbnails     # example_workflows/*.jpg

Used by tests/test_workflows_run.py and for the thumbnails; the real server path is
tests/test_comfyui_integration.py. The stand-ins only collect what SaveImage / PreviewAny would
show and stitch images like ImageStitch (direction right), nothing more.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from nodes import node_classes  # noqa: E402

API_DIR = ROOT / "workflows" / "api"
UI_DIR = ROOT / "example_workflows"


def _stitch(image1: torch.Tensor, image2: torch.Tensor | None = None, spacing_width: int = 0,
            **_: object) -> torch.Tensor:
    if image2 is None:
        return image1
    gap = torch.ones(image1.shape[0], image1.shape[1], spacing_width, 3)
    return torch.cat([image1, gap, image2], dim=2)


def run(workflow: dict, overrides: dict | None = None) -> dict[str, tuple]:
    """Execute every node once in dependency order; returns node id -> output tuple.

    overrides: {class_type: {input: value}} applied to every node of that type (e.g. steps).
    """
    classes = {c.define_schema().node_id: c for c in node_classes()}
    done: dict[str, tuple] = {}

    def exec_node(key: str) -> tuple:
        if key in done:
            return done[key]
        node = workflow[key]
        kw = {}
        for name, value in node["inputs"].items():
            is_link = isinstance(value, list) and len(value) == 2 and str(value[0]) in workflow
            kw[name] = exec_node(str(value[0]))[value[1]] if is_link else value
        kw.update((overrides or {}).get(node["class_type"], {}))
        kind = node["class_type"]
        if kind in classes:
            out = tuple(classes[kind].execute(**kw).args)
        elif kind == "ImageStitch":
            out = (_stitch(**kw),)
        elif kind == "DistributedSeed":  # participant 0 = the master (seed as is); k = the
            out = (kw["seed"] + kw.get("participant", 0),)  # engine's worker k-1: seed + k
        elif kind == "DistributedCollector":  # with no workers it returns its own images
            out = (kw["images"], None)
        elif kind in ("SaveImage", "PreviewAny"):
            out = (kw.get("images", kw.get("source")),)
        else:
            raise ValueError(f"node {key}: {kind} has no local stand-in")
        done[key] = out
        return out

    for key in workflow:
        exec_node(key)
    return done


def _grid(images: torch.Tensor, gap: int = 2) -> torch.Tensor:
    """[B, H, W, 3] -> one mosaic with `gap` px between tiles, cols = ceil(sqrt(B))."""
    n, h, w, _ = images.shape
    cols = math.ceil(math.sqrt(n))
    rows = math.ceil(n / cols)
    canvas = torch.full((rows * (h + gap) - gap, cols * (w + gap) - gap, 3), 27 / 255)
    for i in range(n):
        r, c = divmod(i, cols)
        canvas[r * (h + gap):r * (h + gap) + h, c * (w + gap):c * (w + gap) + w] = images[i]
    return canvas


def _card(title: str, images: torch.Tensor, lines: list[str], size=(320, 320)) -> object:
    """A thumbnail card: title, the images side by side (nearest-upscaled), stats lines."""
    from PIL import Image, ImageDraw  # noqa: PLC0415

    card = Image.new("RGB", size, (27, 27, 31))
    draw = ImageDraw.Draw(card)
    draw.text((10, 8), title, fill=(232, 232, 236))
    arr = (_grid(images).clamp(0, 1).numpy() * 255).round().astype("uint8")
    pic = Image.fromarray(arr, "RGB")
    box_w, box_h = size[0] - 20, size[1] - 34 - 16 * len(lines)
    scale = min(box_w / pic.width, box_h / pic.height)
    pic = pic.resize((max(1, int(pic.width * scale)), max(1, int(pic.height * scale))),
                     Image.NEAREST)
    card.paste(pic, ((size[0] - pic.width) // 2, 28))
    for i, text in enumerate(lines):
        draw.text((10, size[1] - 16 * (len(lines) - i) - 2), text, fill=(123, 216, 143))
    return card


TITLES = {
    "ladr_nano_text_to_image": "LADR text-to-image (DiMOO-nano, CPU)",
    "ladr_vs_baseline_side_by_side": "LADR | baseline, same seed",
    "ladr_dimoo_1024_real_model": "Real Lumina-DiMOO 1024px + ML-Cache",
    "ladr_batch_of_prompts": "Batch of prompts (one per line)",
    "ladr_distributed_seed_collector": "ComfyUI-Distributed: master + 2 workers",
}


def thumbnails() -> list[Path]:
    """Run each example (the real-model one on the nano model, 48 px) and write its .jpg."""
    written = []
    for path in sorted(API_DIR.glob("*.json")):
        wf = json.loads(path.read_text())
        real = path.stem == "ladr_dimoo_1024_real_model"
        if real:  # no 8B checkpoint here: show the same graph on the nano model
            wf["1"]["inputs"]["model_name"] = "dimoo-nano (built-in)"
            for node in wf.values():
                if node["class_type"] == "LADR_DiMOOSampler":
                    node["inputs"].update(width=48, height=48, prompt="a blue square above a red circle")
        # Distributed Seed: what the Collector gathers from the master and two workers.
        parts = 3 if any(n["class_type"] == "DistributedSeed" for n in wf.values()) else 1
        outs = [run(wf, {"DistributedSeed": {"participant": p}}) for p in range(parts)]
        out = outs[0]
        saves = [k for k, n in wf.items() if n["class_type"] == "SaveImage"]
        images = torch.cat([o[k][0] for o in outs for k in saves])
        stats = [out[k][0] for k, n in wf.items() if n["class_type"] == "PreviewAny"]
        lines = [s.split(",")[0] + "," + s.split(",")[1] for s in stats]
        if real:
            lines = ["needs models/lumina_dimoo/Lumina-DiMOO", *lines]
        if parts > 1:
            seed = next(n for n in wf.values() if n["class_type"] == "DistributedSeed")
            s = seed["inputs"]["seed"]
            lines = [f"master seed {s}, workers {s + 1}, {s + 2}", *lines]
        card = _card(TITLES.get(path.stem, path.stem), images, lines)
        target = UI_DIR / f"{path.stem}.jpg"
        card.save(target, "JPEG", quality=88)
        written.append(target)
    return written


def main() -> int:
    ap = argparse.ArgumentParser(description="Run an API workflow locally (no server).")
    ap.add_argument("workflow", nargs="?", help="API-format workflow JSON")
    ap.add_argument("--thumbnails", action="store_true", help="write example_workflows/*.jpg")
    args = ap.parse_args()
    if args.thumbnails:
        for p in thumbnails():
            print(p.relative_to(ROOT))
        return 0
    if not args.workflow:
        ap.error("give a workflow or --thumbnails")
    out = run(json.loads(Path(args.workflow).read_text()))
    for key, value in out.items():
        if isinstance(value[0], str):
            print(f"{key}: {value[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
