"""Draw the Browse-Templates thumbnails (example_workflows/*.jpg) with the real pipeline.

    .venv/bin/python -m lab.workflows.thumbnails [names...]   # all examples, or those named

For each API workflow, every DiMOO Sampler and what it depends on (rule, canvas, policy, cache
nodes, Load Image) run in this process through the nodes themselves (run_graph.py) on the
built-in nano model; the tokens are decoded by VQ Decode's own routine. Queuing the workflows
in a real server is tests/host/test_comfyui_integration.py.
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import torch

if "comfy_api" not in sys.modules and importlib.util.find_spec("comfy_api") is None:  # outside
    # ComfyUI (and outside the tests, which install it themselves): the nodes' helpers run
    # against the tests' strict stand-in of its V3 API
    from tests.kit import comfy_stand_in

    comfy_stand_in.install()

import ladr_core
from nodes import DiMOOModel, decode_tokens
from tests.kit.run_graph import SAMPLERS, load_image, pad_for_outpainting
from tests.kit.run_graph import run_samplers as run_graph
from tests.kit.templates import TEMPLATE_FILES

ROOT = Path(__file__).resolve().parents[2]

API_DIR = ROOT / "example_workflows" / "api"
UI_DIR = ROOT / "example_workflows"


def _source(wf: dict, value: object) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The (IMAGE, MASK) outputs of the Load Image / Pad Image for Outpainting node a socket
    links to (None: not linked)."""
    if not isinstance(value, list):
        return None
    node = wf[str(value[0])]
    kw = node["inputs"]
    if node["class_type"] == "LoadImage":
        return load_image(kw["image"])
    if node["class_type"] == "ImagePadForOutpaint":
        image = _source(wf, kw["image"])[0]
        return pad_for_outpainting(image, kw["left"], kw["top"], kw["right"], kw["bottom"],
                                   kw["feathering"])
    raise ValueError(f"image / mask from {node['class_type']}: not modelled here")


def passes(count: int) -> str:
    """"1 pass", "8 passes"."""
    return f"{count} pass{'' if count == 1 else 'es'}"


def run_samplers(wf: dict, pipe: object) -> list[tuple[torch.Tensor, str, dict]]:
    """Each sampler node of the workflow run on `pipe` through the nodes themselves
    (run_graph.py), decoded: (images [B, H, W, 3], a short caption line, its stats)."""
    model = DiMOOModel(pipe=pipe, key=("nano",), name="nano")  # type: ignore[arg-type]
    out = []
    for tokens, _ in run_graph(wf, model, SAMPLERS[:2]).values():  # nano cannot edit
        s = tokens.stats
        text = (f"baseline: {passes(s['nfe'])} (official sampler)" if s["strategy"] == "baseline"
                else f"{s['strategy']}: {passes(s['nfe'])} "
                f"(official {round(s['official_nfe_per_image'])})")
        out.append((decode_tokens(model, tokens), text, s))
    return out


def run_lines(runs: list[tuple[torch.Tensor, str, dict]]) -> list[str]:
    """The caption lines under the pictures: one per run when two fit, else every run's count
    on one line (in the pictures' order) and the official sampler's on the next, so each
    picture has its label."""
    if len(runs) <= 2:
        return [text for _, text, _ in runs]
    strategies = {s["strategy"] for *_, s in runs}
    name = strategies.pop() if len(strategies) == 1 else "passes"
    counts = ", ".join(str(s["nfe"]) for *_, s in runs)
    official = ", ".join(str(round(s["official_nfe_per_image"])) for *_, s in runs)
    return [f"{name}: {counts} passes", f"official: {official}"]


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


CARD = 320  # px; the browser shows the card at about 220 px
BADGE_PX = 52
"""The template browser floats a "Node graph" badge over a card's top-left corner (frontend
1.49: about 110 x 34 px of a 220 px card): nothing is drawn under it."""
FONT_PX = 18  # about 12 px on screen


def _font() -> object:
    from PIL import ImageFont  # noqa: PLC0415

    return ImageFont.load_default(size=FONT_PX)


def _card(images: torch.Tensor, lines: list[str], size: int = CARD) -> object:
    """A thumbnail card: the images side by side (nearest-upscaled) below the badge's band,
    then a caption of up to three lines in a font about 12 px on screen."""
    from PIL import Image, ImageDraw  # noqa: PLC0415

    card = Image.new("RGB", (size, size), (27, 27, 31))
    draw = ImageDraw.Draw(card)
    font = _font()
    arr = (_grid(images).clamp(0, 1).numpy() * 255).round().astype("uint8")
    pic = Image.fromarray(arr, "RGB")
    line_h = FONT_PX + 5
    box_w, box_h = size - 16, size - BADGE_PX - 10 - line_h * len(lines)
    scale = min(box_w / pic.width, box_h / pic.height)
    pic = pic.resize((max(1, int(pic.width * scale)), max(1, int(pic.height * scale))),
                     Image.NEAREST)
    card.paste(pic, ((size - pic.width) // 2, BADGE_PX + (box_h - pic.height) // 2))
    for i, text in enumerate(lines):
        y = size - line_h * (len(lines) - i) - 3
        width = draw.textlength(text, font=font)
        draw.text(((size - width) / 2, y), text, font=font,
                  fill=(232, 232, 236) if i == 0 else (123, 216, 143))
    return card


CAPTIONS = {
    "ladr_nano_text_to_image": "text to image on a CPU",
    "ladr_vs_baseline_side_by_side": "LADR | official, same seed",
    "ladr_dimoo_1024_real_model": "shown: the same graph on nano",
    "ladr_batch_of_prompts": "four prompts, one per line",
    "ladr_nano_inpaint_mask_editor": "input | mask | result",
    "ladr_nano_outpaint_pad_image": "padded input | mask | result",
    "ladr_dimoo_edit_real_model": "the image to edit",
    "ladr_distributed_seed_collector": "one image per server",
    "ladr_nano_img2img_strengths": "drawn | redrawn at 0.25, 0.5, 0.75",
    "ladr_nano_caption_to_image": "input | drawn from its caption",
    "ladr_emoji_text_to_image": "text to image on a CPU (emoji)",
}
"""The first caption line of each card: what its tiles are."""


def inputs_shown(wf: dict) -> list[torch.Tensor]:
    """Tiles shown before a workflow's results: each painting sampler's input image and mask
    (white = regenerate; a paint canvas without a mask: the picture it redraws), and each edit
    node's reference image."""
    tiles = []
    for node in wf.values():
        kw = node["inputs"]
        if node["class_type"] in (*SAMPLERS, "LADR_PaintCanvas") and \
                isinstance(kw.get("mask"), list):
            image, mask = _source(wf, kw["image"])[0], _source(wf, kw["mask"])[1]
            tiles += [image, mask[..., None].expand(*mask.shape, 3)]
        elif node["class_type"] == "LADR_PaintCanvas":
            tiles.append(_source(wf, kw["image"])[0])
        if node["class_type"] in ("LADR_DiMOOEdit", "LADR_DiMOOCaption", "LADR_DiMOOAsk"):
            tiles.append(_source(wf, kw["image"])[0])
    return tiles


def built_in_path(wf: dict) -> Path:
    """The checkpoint a workflow's loader names when it is a built-in one (the nano that
    answers, for the caption template), else the built-in nano (the real-model templates'
    stand-in here)."""
    from nodes import BUILT_IN

    names = [n["inputs"]["model_name"] for n in wf.values()
             if n["class_type"] == "LADR_LoadDiMOOModel"]
    chosen = BUILT_IN.get(names[0] if names else "", "nano_model_path")
    return Path(getattr(ladr_core, chosen)())


def thumbnails(names: list[str] | None = None) -> list[Path]:
    """Run each example (or those named) on the nano model (the real-model text-to-image one at
    48 px; the edit one shows its input only: nano cannot edit) and write its .jpg."""
    pipes: dict[Path, object] = {}
    written = []
    for path in sorted(API_DIR.glob("*.json")):
        if names and path.stem not in names:
            continue
        wf = json.loads(path.read_text())
        folder = built_in_path(wf)
        if not (folder / "config.json").is_file():  # its input only, and what it needs
            shown = torch.cat([_fit(im, 48) for im in inputs_shown(wf)])
            card = _card(shown, ["its input", f"needs {folder.name} (not here yet)"])
            card.save(UI_DIR / f"{TEMPLATE_FILES[path.stem]}.jpg", "JPEG", quality=88)
            continue
        if folder not in pipes:
            pipes[folder] = ladr_core.load_dimoo(folder, dtype=torch.float32)
        pipe = pipes[folder]
        real = path.stem == "ladr_dimoo_1024_real_model"
        if real:  # no 8B checkpoint here: show the same graph on the nano model
            for node in wf.values():
                if node["class_type"] in ("LADR_Canvas", "LADR_DiMOOSampler"):
                    node["inputs"].update(width=48, height=48)
                if node["class_type"] in SAMPLERS:
                    node["inputs"].update(prompt="a blue square above a red circle")
        runs = run_samplers(wf, pipe)
        seeds = [n for n in wf.values() if n["class_type"] == "DistributedSeed"]
        if seeds:  # the master and two workers: Distributed Seed gives worker k seed + k
            base = int(seeds[0]["inputs"]["seed"])
            for k in (1, 2):
                seeds[0]["inputs"]["seed"] = base + k
                runs += run_samplers(wf, pipe)
            runs = [(torch.cat([im for im, *_ in runs]),
                     f"seeds {base}, {base + 1}, {base + 2}", runs[0][2])]
        shown = inputs_shown(wf)
        size = max(max(im.shape[1:3]) for im in [*shown, *(im for im, *_ in runs)])
        images = torch.cat([_fit(im, size) for im in [*shown, *(im for im, *_ in runs)]])
        lines = [CAPTIONS[path.stem], *run_lines(runs)]
        if real or any(n["class_type"] == "LADR_DiMOOEdit" for n in wf.values()):
            lines = [CAPTIONS[path.stem], "needs the Lumina-DiMOO 8B model"]
        card = _card(images, lines)
        target = UI_DIR / f"{TEMPLATE_FILES[path.stem]}.jpg"
        card.save(target, "JPEG", quality=88)
        written.append(target)
    return written


def _fit(images: torch.Tensor, size: int) -> torch.Tensor:
    """[B, H, W, 3] on a [B, size, size, 3] dark tile (smaller ones centred, larger ones
    reduced by area averaging), so inputs and results of different sizes share one grid."""
    b, h, w, _ = images.shape
    if max(h, w) > size:
        scale = size / max(h, w)
        images = torch.nn.functional.interpolate(
            images.permute(0, 3, 1, 2), size=(round(h * scale), round(w * scale)),
            mode="area").permute(0, 2, 3, 1)
        b, h, w, _ = images.shape
    tile = torch.full((b, size, size, 3), 27 / 255)
    top, left = (size - h) // 2, (size - w) // 2
    tile[:, top:top + h, left:left + w] = images
    return tile


if __name__ == "__main__":
    for written_path in thumbnails(sys.argv[1:] or None):
        print(written_path.relative_to(ROOT))
