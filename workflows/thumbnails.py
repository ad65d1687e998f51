"""Draw the Browse-Templates thumbnails (example_workflows/*.jpg) with the real pipeline.

    .venv/bin/python workflows/thumbnails.py

For each API workflow, every DiMOO Sampler's settings (and its linked LADR Policy / Prophet
Policy / ML-Cache Options values) are read from the JSON and run through the node's own helpers
and the real `DiMOOPipeline.generate` on the built-in nano model. No node graph is executed
here: running the workflows themselves is tests/test_comfyui_integration.py, on a real server.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import ladr_core  # noqa: E402
from nodes import policy as policy_nodes  # noqa: E402
from nodes.cache import build_cache  # noqa: E402
from nodes.sampler import pick_strategy, split_prompts  # noqa: E402

API_DIR = ROOT / "workflows" / "api"
UI_DIR = ROOT / "example_workflows"
BUILDERS = {"LADR_Policy": lambda kw: policy_nodes.build_strategy(**kw),
            "LADR_ProphetPolicy": lambda kw: policy_nodes.build_prophet(**kw),
            "LADR_MLCacheOptions": lambda kw: build_cache(**kw)}


def _option(wf: dict, value: object) -> object:
    """A linked option node ([id, slot]) -> the value its node builds; None when unlinked."""
    if not isinstance(value, list):
        return None
    node = wf[str(value[0])]
    return BUILDERS[node["class_type"]](node["inputs"])


def _seed(wf: dict, value: object) -> int:
    """The seed widget, or the seed a linked ComfyUI-Distributed "Distributed Seed" gives the
    master (participant 0: its own seed unchanged; worker k would add k)."""
    if isinstance(value, list):
        node = wf[str(value[0])]
        if node["class_type"] != "DistributedSeed":
            raise ValueError(f"seed linked to {node['class_type']}: only DistributedSeed is known")
        return int(node["inputs"]["seed"])
    return int(value)


def run_samplers(wf: dict, pipe: object) -> list[tuple[torch.Tensor, str]]:
    """Each DiMOO Sampler of the workflow run on `pipe`: (images [B, H, W, 3], stats line)."""
    out = []
    for node in wf.values():
        if node["class_type"] != "LADR_DiMOOSampler":
            continue
        kw = node["inputs"]
        strategy, steps, _ = pick_strategy(kw["strategy"], _option(wf, kw.get("policy")),
                                           kw["steps"])
        res = pipe.generate(split_prompts(kw["prompt"], kw["one_prompt_per_line"])[0],
                            negative_prompt=kw["negative_prompt"] or None, width=kw["width"],
                            height=kw["height"], steps=steps, cfg=kw["cfg"],
                            temperature=kw["temperature"], seed=_seed(wf, kw["seed"]), strategy=strategy,
                            cache=_option(wf, kw.get("cache")), batch_size=kw["batch_size"])
        out.append((res.images.float().cpu(), f"{strategy.name}: {res.steps} steps, NFE {res.nfe}"))
    return out


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
}


def thumbnails() -> list[Path]:
    """Run each example on the nano model (the real-model one at 48 px) and write its .jpg."""
    pipe = ladr_core.load_dimoo(ladr_core.nano_model_path(), dtype=torch.float32)
    written = []
    for path in sorted(API_DIR.glob("*.json")):
        wf = json.loads(path.read_text())
        real = path.stem == "ladr_dimoo_1024_real_model"
        if real:  # no 8B checkpoint here: show the same graph on the nano model
            for node in wf.values():
                if node["class_type"] == "LADR_DiMOOSampler":
                    node["inputs"].update(width=48, height=48, prompt="a blue square above a red circle")
        runs = run_samplers(wf, pipe)
        images = torch.cat([im for im, _ in runs])
        lines = [text for _, text in runs]
        if real:
            lines = ["needs models/lumina_dimoo/Lumina-DiMOO", *lines]
        card = _card(TITLES.get(path.stem, path.stem), images, lines)
        target = UI_DIR / f"{path.stem}.jpg"
        card.save(target, "JPEG", quality=88)
        written.append(target)
    return written


if __name__ == "__main__":
    for written_path in thumbnails():
        print(written_path.relative_to(ROOT))
