"""The "ladr.step" event payload: a small JSON dict built from one sampler step record.

The payload is what `web/ladr_preview_draw.js` draws (a pure function of it), so its keys are a
contract like the step record's: added, never renamed.

  node (str)       ComfyUI node id of the sampler        step (int, 1-based) / steps (int T)
  phase (str)      exploration | structure | refinement | n/a   (of the shown image)
  strategy (str)   ladr | baseline | prophet             nfe (int, denoiser calls so far)
  masked_pct (float, % of the shown image still masked)  rescued / unmasked (int, this step)
  progress (float) in [0, 1]: (images finished + each image in flight's gamma^-1(masked
                   share), cosine) / images; monotone, 1.0 at the end; a multi-turn
                   edit's turns share it: (turn - 1 + that) / turns
  turn / turns (int) 1-based turn of a multi-turn edit and their count (1 / 1 otherwise)
  grid [h, w]      token grid; bitmaps below are h*w bits, row-major, MSB first, base64
  rescued_bits     tokens rescued by LADR this step      masked_bits   tokens still masked
  image (int)      1-based index of the shown image (the first in flight; a rolling batch
                   moves on as images finish)           images (int) in the whole run
  images_done (int) images finished before this step
  done (bool)      True on the final event, which adds `stats` (`stats_dict`), the run's map
                   (`RunMap.fields`) and finished_at (Unix seconds); the sampler also returns
                   it as its UI output "ladr_step_map" (handles.step_map_ui) with "preview"

The image travels through ONE channel, ComfyUI's progress-bar preview; the event carries none.
"""

from __future__ import annotations

import base64
import time
from typing import Any

import numpy as np
import torch

from ladr_core import PHASE_NAMES, StepSchedule, get_schedule

from . import run_stats

EVENT = "ladr.step"
PROGRESS_SCHEDULE = get_schedule("cosine")


def pack_bits(mask: torch.Tensor) -> str:
    """Bool [N] -> base64 of np.packbits (MSB first): N/8 bytes, e.g. 4096 tokens -> 684 chars."""
    arr = mask.detach().to("cpu", torch.bool).numpy().reshape(-1)
    return base64.b64encode(np.packbits(arr).tobytes()).decode("ascii")


def rgb8(image: torch.Tensor) -> torch.Tensor:
    """Float [H, W, 3] in [0, 1] -> uint8 on the same device (only bytes cross to the CPU)."""
    return image.detach().clamp(0, 1).mul(255).round().to(torch.uint8)


def to_pil(image: torch.Tensor) -> Any:
    """Float [H, W, 3] in [0, 1] -> PIL RGB image."""
    from PIL import Image  # noqa: PLC0415 - pillow only when a preview is drawn

    return Image.fromarray(rgb8(image).cpu().numpy(), "RGB")


def shown_slot(record: dict) -> int:
    """The slot the preview and the widget show: the first holding an image (in flight)."""
    return next((s for s, item in enumerate(record.get("items", [0])) if item >= 0), 0)


def _step_bytes(record: dict, image: torch.Tensor | None) -> list[torch.Tensor]:
    """Flat uint8 tensors on the record's device: the preview's RGB bytes (if given), the shown
    slot's masked / rescued / unmasked rows [N], then as int32 bytes every slot's masked count
    and count to generate and the shown slot's phase."""
    masked_all = record["masked"]
    s = shown_slot(record)
    total = record.get("total")
    if total is None:
        total = torch.full_like(masked_all[:, 0], masked_all.shape[1], dtype=torch.long)
    phase = record.get("phase")
    ints = [masked_all.sum(dim=1), total] + ([phase[s:s + 1]] if phase is not None else [])
    out = [] if image is None else [rgb8(image).reshape(-1)]
    out += [masked_all[s].to(torch.uint8), record["rescued"][s].to(torch.uint8),
            record["unmasked"][s].to(torch.uint8),
            torch.cat([t.reshape(-1).to(torch.int32) for t in ints]).view(torch.uint8)]
    return out


def step_update(record: dict, node_id: str | None,
                image: torch.Tensor | None) -> tuple[dict, Any]:
    """(payload, PIL preview or None) for one step. `image`: the preview, float [h, w, 3] in
    [0, 1] on the record's device, made uint8 there so that only bytes cross with the masks and
    counts: ONE host sync per step for the widget and the preview together."""
    parts = _step_bytes(record, image)
    flat = torch.cat(parts).cpu()
    pieces = list(flat.split([t.numel() for t in parts]))
    pil = None
    if image is not None:
        from PIL import Image  # noqa: PLC0415 - pillow only when a preview is drawn

        pil = Image.fromarray(pieces.pop(0).view(*image.shape[:2], 3).numpy(), "RGB")
    return _payload(record, node_id, pieces), pil


def step_payload(record: dict, node_id: str | None) -> dict:
    """Step record -> JSON payload (module docstring): ``step_update`` without a preview."""
    return step_update(record, node_id, None)[0]


def _payload(record: dict, node_id: str | None, pieces: list[torch.Tensor]) -> dict:
    """The payload from the host copies of ``_step_bytes`` (after the preview's bytes)."""
    masked, rescued, unmasked = (t.bool() for t in pieces[:3])
    n = masked.numel()
    b = record["masked"].shape[0]
    ints = pieces[3].clone().view(torch.int32).tolist()  # clone: an aligned buffer for the view
    counts, totals = ints[:b], ints[b:2 * b]
    ph = ints[2 * b] if len(ints) > 2 * b else -1
    items = record.get("items", list(range(b)))
    images = int(record.get("batch", b))
    done = int(record.get("done", 0))
    turn, turns = int(record.get("turn", 0)), int(record.get("turns", 1))  # a multi-turn edit
    flying = sum(float(PROGRESS_SCHEDULE.gamma_inv(c / max(t, 1)))
                 for c, t, item in zip(counts, totals, items, strict=True) if item >= 0)
    h, w = record["grid"]
    return {
        "node": None if node_id is None else str(node_id),
        "step": int(record["step"]) + 1,
        "steps": int(record["steps"]),
        "strategy": str(record.get("strategy", "")),
        "phase": PHASE_NAMES[ph] if 0 <= ph < len(PHASE_NAMES) else "n/a",
        "nfe": int(record["nfe"]),
        "masked_pct": round(100.0 * int(masked.sum()) / max(n, 1), 2),
        "progress": min(1.0, (turn + (done + flying) / max(images, 1)) / turns),
        "turn": turn + 1,
        "turns": turns,
        "rescued": int(rescued.sum()),
        "unmasked": int(unmasked.sum()),
        "grid": [int(h), int(w)],
        "rescued_bits": pack_bits(rescued),
        "masked_bits": pack_bits(masked),
        "image": int(items[shown_slot(record)]) + 1,
        "images": images,
        "images_done": done,
        "done": False,
    }


def stats_dict(result: Any, strategy: str, planned: StepSchedule = run_stats.PLANNED) -> dict:
    """GenerationResult -> the sampler's numbers, with `planned`'s official cost (run_stats)."""
    full = int(getattr(result, "token_forwards_full", 0) or 0)
    items = list(getattr(result, "item_nfe", None) or [])
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
        "nfe_per_image": round(sum(items) / len(items), 2) if items else float(result.nfe),
        **run_stats.work_fields(result, planned),
    }
    scored = getattr(result, "self_score", None)
    if scored is not None:  # opt-in: generate(self_score=...), its passes are extra forwards
        out["self_score"] = [round(float(v), 4) for v in scored.score.tolist()]
        out["self_score_passes"] = int(scored.config.passes)
    return out


stats_text = run_stats.stats_text  # the one human line for the STRING output


def unpack_bits(b64: str, n: int) -> np.ndarray:
    """``pack_bits``'s text -> bool [n] (np.unpackbits, MSB first)."""
    raw = np.frombuffer(base64.b64decode(b64), dtype=np.uint8)
    return np.unpackbits(raw, count=n).astype(bool)


class RunMap:
    """The shown image's run as the step map's final frame draws it (``trackRun`` of
    web/ladr_preview_draw.js): the tokens rescued, and the step each was first seen decoded
    (0: never). A payload at step 1, or on another grid, starts a new run."""

    def __init__(self) -> None:
        self.rescued = np.zeros(0, dtype=bool)
        self.order = np.zeros(0, dtype=np.uint16)

    def update(self, payload: dict) -> None:
        n = payload["grid"][0] * payload["grid"][1]
        if self.rescued.size != n or payload["step"] == 1:
            self.rescued, self.order = np.zeros(n, dtype=bool), np.zeros(n, dtype=np.uint16)
        self.rescued |= unpack_bits(payload["rescued_bits"], n)
        first = ~unpack_bits(payload["masked_bits"], n) & (self.order == 0)
        self.order[first] = min(int(payload["step"]), 65535)

    def fields(self) -> dict:
        """rescued_run_bits (``pack_bits``) and decode_order_b64 (uint16 little-endian per
        token, base64); empty before any step."""
        if not self.rescued.size:
            return {}
        return {"rescued_run_bits": pack_bits(torch.from_numpy(self.rescued)),
                "decode_order_b64": base64.b64encode(self.order.astype("<u2").tobytes())
                .decode("ascii")}


def final_payload(node_id: str | None, stats: dict, last: dict | None,
                  run_map: RunMap | None = None) -> dict:
    """The last event: the final step's payload (if any), `done`, stats, run map, finish time."""
    out = dict(last) if last else {"node": None if node_id is None else str(node_id)}
    out.update({"done": True, "stats": stats, "finished_at": round(time.time(), 3),
                **(run_map.fields() if run_map is not None else {})})
    return out
