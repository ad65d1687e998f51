"""The "ladr.step" event payload: a small JSON dict built from one sampler step record.

The payload is what `web/ladr_preview_draw.js` draws (a pure function of it), so its keys are a
contract like the step record's: added, never renamed.

  node (str)       ComfyUI node id of the sampler        step (int, 1-based) / steps (int T)
  phase (str)      exploration | structure | refinement | n/a   (record `phase` of item 0)
  strategy (str)   ladr | baseline | prophet             nfe (int, denoiser calls so far)
  masked_pct (float, % of item 0 still masked)           rescued / unmasked (int, this step)
  grid [h, w]      token grid; bitmaps below are h*w bits, row-major, MSB first, base64
  rescued_bits     tokens rescued by LADR this step      masked_bits   tokens still masked
  preview (str|None) base64 PNG of `pipe.preview(...)` of item 0 (<= PREVIEW_MAX px a side)
  done (bool)      True on the final event, which adds `stats` (see `stats_dict`)
"""

from __future__ import annotations

import base64
import io
from typing import Any

import numpy as np
import torch

EVENT = "ladr.step"
PREVIEW_MAX = 128
PHASES = {0: "exploration", 1: "structure", 2: "refinement"}


def pack_bits(mask: torch.Tensor) -> str:
    """Bool [N] -> base64 of np.packbits (MSB first): N/8 bytes, e.g. 4096 tokens -> 684 chars."""
    arr = mask.detach().to("cpu", torch.bool).numpy().reshape(-1)
    return base64.b64encode(np.packbits(arr).tobytes()).decode("ascii")


def png_b64(image: Any, max_side: int = PREVIEW_MAX) -> str:
    """Float [H, W, 3] tensor in [0, 1] or PIL image -> base64 PNG, nearest-downscaled so
    max(H, W) <= max_side (a 64 x 64-token preview at 128 px is ~16 KB)."""
    pil = to_pil(image) if isinstance(image, torch.Tensor) else image
    return encode_png(shrink(pil, max_side))


def to_pil(image: torch.Tensor, max_side: int | None = None) -> Any:
    """Float [H, W, 3] in [0, 1] -> PIL RGB image (optionally shrunk to `max_side`).

    The uint8 conversion runs on the tensor's device, so only bytes cross to the CPU.
    """
    from PIL import Image  # noqa: PLC0415 - pillow only when a preview is drawn

    rgb8 = image.detach().clamp(0, 1).mul(255).round().to(torch.uint8).cpu().numpy()
    return shrink(Image.fromarray(rgb8, "RGB"), max_side)


def shrink(pil: Any, max_side: int | None) -> Any:
    """Nearest-neighbour downscale so the longer side is <= max_side (token cells stay sharp)."""
    if max_side is None or max(pil.size) <= max_side:
        return pil
    from PIL import Image  # noqa: PLC0415

    scale = max_side / max(pil.size)
    size = (max(1, round(pil.width * scale)), max(1, round(pil.height * scale)))
    return pil.resize(size, Image.NEAREST)


def encode_png(pil: Any) -> str:
    buf = io.BytesIO()
    pil.save(buf, format="PNG", compress_level=1)  # speed over bytes: it is sent every step
    return base64.b64encode(buf.getvalue()).decode("ascii")


def step_payload(record: dict, node_id: str | None, preview: Any | None) -> dict:
    """Step record (ARCHITECTURE.md Sec. 1) of item 0 -> JSON payload (module docstring).

    Item 0's masked / rescued / unmasked rows and its phase travel to the CPU in ONE transfer
    (one host sync per step for the widget, whatever the device).
    """
    n = int(record["masked"].shape[1])
    phase = record.get("phase")
    parts = [record["masked"][0], record["rescued"][0], record["unmasked"][0]]
    flat = torch.cat([p.reshape(-1).long() for p in parts]
                     + ([phase[:1].long()] if phase is not None else [])).cpu()
    masked, rescued, unmasked = (flat[i * n:(i + 1) * n].bool() for i in range(3))
    ph = int(flat[3 * n]) if phase is not None else -1
    h, w = record["grid"]
    return {
        "node": None if node_id is None else str(node_id),
        "step": int(record["step"]) + 1,
        "steps": int(record["steps"]),
        "strategy": str(record.get("strategy", "")),
        "phase": PHASES.get(ph, "n/a"),
        "nfe": int(record["nfe"]),
        "masked_pct": round(100.0 * int(masked.sum()) / max(n, 1), 2),
        "rescued": int(rescued.sum()),
        "unmasked": int(unmasked.sum()),
        "grid": [int(h), int(w)],
        "rescued_bits": pack_bits(rescued),
        "masked_bits": pack_bits(masked),
        "preview": None if preview is None else png_b64(preview),
        "done": False,
    }


def stats_dict(result: Any, strategy: str) -> dict:
    """GenerationResult (ARCHITECTURE.md Sec. 2) -> the numbers the sampler reports."""
    full = int(getattr(result, "token_forwards_full", 0) or 0)
    used = int(getattr(result, "token_forwards", 0) or 0)
    saved = 0.0 if full <= 0 else round(100.0 * (1.0 - used / full), 1)
    return {
        "strategy": strategy,
        "steps": int(result.steps),
        "nfe": int(result.nfe),
        "seconds": round(float(result.seconds), 3),
        "token_forwards": used,
        "token_forwards_full": full,
        "forwards_saved_pct": saved,
    }


def stats_text(stats: dict) -> str:
    """One human line for the STRING output, e.g. for a Preview-as-Text node."""
    return (
        f"{stats['strategy']}: {stats['steps']} steps, NFE {stats['nfe']}, "
        f"{stats['seconds']:.2f} s, token forwards {stats['token_forwards']}/"
        f"{stats['token_forwards_full']} ({stats['forwards_saved_pct']:.1f}% saved)"
    )


def final_payload(node_id: str | None, stats: dict, last: dict | None) -> dict:
    """The last event: the final step's payload (if any) with `done` and the stats."""
    out = dict(last) if last else {"node": None if node_id is None else str(node_id)}
    out.update({"done": True, "stats": stats})
    return out
