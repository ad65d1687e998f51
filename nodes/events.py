"""The "ladr.step" event payload: a small JSON dict built from one sampler step record.

The payload is what `web/ladr_preview_draw.js` draws (a pure function of it), so its keys are a
contract like the step record's: added, never renamed.

  node (str)       ComfyUI node id of the sampler        step (int, 1-based) / steps (int T)
  phase (str)      exploration | structure | refinement | n/a   (record `phase` of item 0)
  strategy (str)   ladr | baseline | prophet             nfe (int, denoiser calls so far)
  masked_pct (float, % of item 0 still masked)           rescued / unmasked (int, this step)
  progress (float) in [0, 1]: t_eff = gamma^-1(masked share) after the step of the slowest
                   item (cosine schedule, the one generate() uses); monotone, 1.0 at the end
  grid [h, w]      token grid; bitmaps below are h*w bits, row-major, MSB first, base64
  rescued_bits     tokens rescued by LADR this step      masked_bits   tokens still masked
  done (bool)      True on the final event, which adds `stats` (see `stats_dict`)

The image itself travels through ONE channel, ComfyUI's progress-bar preview (nodes/host.py
Progress); the event carries no picture.
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
import torch

from ladr_core.policy import PHASE_NAMES
from ladr_core.schedules import get_schedule

EVENT = "ladr.step"
PROGRESS_SCHEDULE = get_schedule("cosine")


def pack_bits(mask: torch.Tensor) -> str:
    """Bool [N] -> base64 of np.packbits (MSB first): N/8 bytes, e.g. 4096 tokens -> 684 chars."""
    arr = mask.detach().to("cpu", torch.bool).numpy().reshape(-1)
    return base64.b64encode(np.packbits(arr).tobytes()).decode("ascii")


def rgb8(image: torch.Tensor) -> torch.Tensor:
    """Float [H, W, 3] in [0, 1] -> uint8 [H, W, 3] on the tensor's device (so only bytes
    cross to the CPU)."""
    return image.detach().clamp(0, 1).mul(255).round().to(torch.uint8)


def to_pil(image: torch.Tensor, max_side: int | None = None) -> Any:
    """Float [H, W, 3] in [0, 1] -> PIL RGB image (optionally shrunk to `max_side`)."""
    from PIL import Image  # noqa: PLC0415 - pillow only when a preview is drawn

    return shrink(Image.fromarray(rgb8(image).cpu().numpy(), "RGB"), max_side)


def shrink(pil: Any, max_side: int | None) -> Any:
    """Nearest-neighbour downscale so the longer side is <= max_side (token cells stay sharp)."""
    if max_side is None or max(pil.size) <= max_side:
        return pil
    from PIL import Image  # noqa: PLC0415

    scale = max_side / max(pil.size)
    size = (max(1, round(pil.width * scale)), max(1, round(pil.height * scale)))
    return pil.resize(size, Image.NEAREST)


def _step_bytes(record: dict, image: torch.Tensor | None) -> list[torch.Tensor]:
    """What a step's event (and preview) needs, as flat uint8 tensors on the record's device:
    the preview's RGB bytes [h, w, 3] (when given), item 0's masked / rescued / unmasked rows
    [N] each, then every item's masked count and item 0's phase as int32 bytes."""
    masked_all = record["masked"]
    phase = record.get("phase")
    ints = [masked_all.sum(dim=1)] + ([phase[:1]] if phase is not None else [])
    out = [] if image is None else [rgb8(image).reshape(-1)]
    out += [masked_all[0].to(torch.uint8), record["rescued"][0].to(torch.uint8),
            record["unmasked"][0].to(torch.uint8),
            torch.cat([t.reshape(-1).to(torch.int32) for t in ints]).view(torch.uint8)]
    return out


def step_update(record: dict, node_id: str | None,
                image: torch.Tensor | None) -> tuple[dict, Any]:
    """(payload, PIL preview or None) for one step, from ONE device -> host transfer.

    image: the step's preview, float [h, w, 3] in [0, 1] on the record's device (None: payload
    only). The preview's uint8 conversion runs on the device, so only bytes cross, together
    with the masks and counts: one host sync per step for the widget and the progress-bar
    preview together, whatever the device.
    """
    parts = _step_bytes(record, image)
    flat = torch.cat(parts).cpu()
    pieces = list(flat.split([t.numel() for t in parts]))
    pil = None
    if image is not None:
        from PIL import Image  # noqa: PLC0415 - pillow only when a preview is drawn

        pil = Image.fromarray(pieces.pop(0).view(*image.shape[:2], 3).numpy(), "RGB")
    return _payload(record, node_id, pieces), pil


def step_payload(record: dict, node_id: str | None) -> dict:
    """Step record (ARCHITECTURE.md Sec. 1) -> JSON payload (module docstring), in one
    transfer (``step_update`` without a preview)."""
    return step_update(record, node_id, None)[0]


def _payload(record: dict, node_id: str | None, pieces: list[torch.Tensor]) -> dict:
    """The payload from the host copies of ``_step_bytes`` (after the preview's bytes)."""
    masked, rescued, unmasked = (t.bool() for t in pieces[:3])
    n = masked.numel()
    b = record["masked"].shape[0]
    ints = pieces[3].clone().view(torch.int32)  # clone: an aligned buffer for the int view
    most_masked = int(ints[:b].max())
    ph = int(ints[b]) if ints.numel() > b else -1
    h, w = record["grid"]
    return {
        "node": None if node_id is None else str(node_id),
        "step": int(record["step"]) + 1,
        "steps": int(record["steps"]),
        "strategy": str(record.get("strategy", "")),
        "phase": PHASE_NAMES[ph] if 0 <= ph < len(PHASE_NAMES) else "n/a",
        "nfe": int(record["nfe"]),
        "masked_pct": round(100.0 * int(masked.sum()) / max(n, 1), 2),
        "progress": float(PROGRESS_SCHEDULE.gamma_inv(most_masked / max(n, 1))),
        "rescued": int(rescued.sum()),
        "unmasked": int(unmasked.sum()),
        "grid": [int(h), int(w)],
        "rescued_bits": pack_bits(rescued),
        "masked_bits": pack_bits(masked),
        "done": False,
    }


def stats_dict(result: Any, strategy: str) -> dict:
    """GenerationResult (ARCHITECTURE.md Sec. 2) -> the numbers the sampler reports."""
    full = int(getattr(result, "token_forwards_full", 0) or 0)
    used = int(getattr(result, "token_forwards", 0) or 0)
    saved = 0.0 if full <= 0 else round(100.0 * (1.0 - used / full), 1)
    out = {
        "strategy": strategy,
        "steps": int(result.steps),
        "nfe": int(result.nfe),
        "seconds": round(float(result.seconds), 3),
        "token_forwards": used,
        "token_forwards_full": full,
        "forwards_saved_pct": saved,
    }
    scored = getattr(result, "self_score", None)
    if scored is not None:  # opt-in: generate(self_score=...), its passes are extra forwards
        out["self_score"] = [round(float(v), 4) for v in scored.score.tolist()]
        out["self_score_passes"] = int(scored.config.passes)
    return out


def stats_text(stats: dict) -> str:
    """One human line for the STRING output, e.g. for a Preview-as-Text node."""
    line = (
        f"{stats['strategy']}: {stats['steps']} steps, NFE {stats['nfe']}, "
        f"{stats['seconds']:.2f} s, token forwards {stats['token_forwards']}/"
        f"{stats['token_forwards_full']} ({stats['forwards_saved_pct']:.1f}% saved)"
    )
    if "self_score" in stats:
        scores = ", ".join(f"{v:+.4f}" for v in stats["self_score"])
        line += (f"; self-score {scores} (mean log p per re-masked token, higher is better; "
                 f"{stats['self_score_passes']} extra passes per image)")
    return line


def final_payload(node_id: str | None, stats: dict, last: dict | None) -> dict:
    """The last event: the final step's payload (if any) with `done` and the stats."""
    out = dict(last) if last else {"node": None if node_id is None else str(node_id)}
    out.update({"done": True, "stats": stats})
    return out
