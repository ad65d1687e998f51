"""Which card fits: the node path's peak per layout, cache, size and batch against 8, 12, 16
and 24 GB cards.

The node path (nodes/sampler.py, nodes/decode.py) keeps the VQ-VAE on the device whole while the
sampler runs (``host.load_to_device`` loads it first, ``force_full_load``); DiMOO VQ Decode then
decodes one image at a time in float32 (``decode_codes``). So its peak is the larger of

* sampling: the pipeline case's peak plus the VQ's weights;
* decoding: the VQ decode measured alone (weights and activations of one image), when the host
  makes room for it by offloading the transformer as far as needed (ComfyUI does when the decode
  asks for its memory), or, if the transformer stays resident, that plus the layout's resident
  weights ("beside"; the two share nothing, so allocated bytes add exactly and reserved bytes
  add to an upper bound).

A configuration fits a card when its peak *reserved* bytes (what the process takes from the
card, the caching allocator's segments) leave ``HEADROOM_GIB`` of the card's nominal size free
for what the allocator does not see: the CUDA context (about 0.3-0.6 GiB with lazily loaded
kernels), cuDNN's workspaces and, on a desktop, the display.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CARDS_GB", "HEADROOM_GIB", "fits", "node_peaks", "smallest_card"]

CARDS_GB = (8, 12, 16, 24)  # nominal sizes; such a card holds about that many GiB
HEADROOM_GIB = 1.0
GIB = 2 ** 30


def node_peaks(layout: dict[str, Any], case: dict[str, Any], vq: dict[str, Any], px: int,
               batch: int) -> dict[str, int]:
    """Allocated and reserved peaks of the node path for one case (module docstring)."""
    decode = vq["decode"][f"{px}/{batch}"]
    alone = (decode["peak_allocated"] - vq["base_allocated"],
             decode["peak_reserved"] - vq["base_reserved"])
    out = {"sampling_allocated": case["peak_allocated"] + vq["weights_bytes"],
           "sampling_reserved": case["peak_reserved"] + vq["weights_reserved"],
           "decode_allocated": alone[0], "decode_reserved": alone[1],
           "decode_beside_allocated": layout["resident_allocated"] + alone[0],
           "decode_beside_reserved": layout["resident_reserved"] + alone[1]}
    for kind in ("allocated", "reserved"):
        out[f"peak_{kind}"] = max(out[f"sampling_{kind}"], out[f"decode_{kind}"])
        out[f"beside_{kind}"] = max(out[f"sampling_{kind}"], out[f"decode_beside_{kind}"])
    return out


def fits(reserved: int, card_gb: int) -> bool:
    return reserved / GIB <= card_gb - HEADROOM_GIB


def smallest_card(reserved: int) -> int | None:
    """The smallest of CARDS_GB the peak fits, or None when not even 24 GB does."""
    return next((c for c in CARDS_GB if fits(reserved, c)), None)
