"""The weight layouts as the GPU tables name and group them, and whether the estimate says a
layout fits a card: shared by the estimate's tables (gpu_estimate.render, gpu_estimate.explain),
the run on the emulated cards (card_fit.table) and the roofline's (roofline.table, .explain),
which all import it from here, below them."""

from __future__ import annotations

from typing import Any

__all__ = ["GROUPS", "LAYOUT_NAMES", "SHORT", "estimated_cell", "fits"]

LAYOUT_NAMES = {"bf16": "bf16", "fp8": "fp8 storage (per-channel scales)",
                "low_vram": "bf16, blocks streamed (composed)", "comfy_fp8": "ComfyUI fp8",
                "int8": "ComfyUI int8", "q8_0": "GGUF Q8_0", "q4_k_m": "GGUF Q4_K_M"}
#: README's groups of layouts, best quality first (the 8-bit ones are close to bf16 on nano,
#: docs/reports/FP8.md and QUANT.md; streaming is bf16 but pays a host-to-device copy per block)
GROUPS = (("bf16", ("bf16",)), ("fp8 / int8 / Q8_0", ("fp8", "comfy_fp8", "int8", "q8_0")),
          ("Q4_K_M", ("q4_k_m",)), ("bf16 streamed", ("low_vram",)))
SHORT = {"fp8": "fp8", "comfy_fp8": "ComfyUI fp8", "int8": "int8", "q8_0": "Q8_0"}


def fits(doc: dict[str, Any], layout: str, key: str, card: int) -> bool:
    """The estimate (gpu_estimate.json `doc`): `layout` at `key` (px/batch/cache) fits a card
    of `card` GB."""
    entry = doc["cards"].get(f"{layout}/{key}")
    return entry is not None and entry["card_gb"] is not None and entry["card_gb"] <= card


def estimated_cell(doc: dict[str, Any], key: str, card: int) -> str:
    """README's cell for a card of `card` GB at `key`: the groups (or their members) that fit."""
    names = []
    for group, members in GROUPS:
        ok = [m for m in members if m in doc["layouts"] and fits(doc, m, key, card)]
        if not ok:
            continue
        present = [m for m in members if m in doc["layouts"]]
        names.append(group if ok == present else " / ".join(SHORT.get(m, m) for m in ok))
    return ", ".join(names) or "-"
