"""How many images the sampler and edit nodes keep in flight (their `max_batch` input, 0 =
automatic).

A prompt list longer than that runs as a rolling batch: each finished image makes room for the
next prompt (ladr_core.sample's `max_batch`). The choice trades speed and memory: in float32
on a CPU every image is the same whatever the number; on a GPU the pass's size changes which
kernels run, so an image may differ in a near tie (docs/ARCHITECTURE.md section 3). The automatic choice is the library's own
(`ladr_core.dimoo.images_in_flight`: 4 on a CPU, what the GPU's free memory holds up to 8), fed
with ComfyUI's count of free memory, so a node and a Python call choose alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ladr_core.dimoo import GPU_IN_FLIGHT, images_in_flight

from . import host

if TYPE_CHECKING:
    from ladr_core import DiMOOPipeline, MLCacheConfig

AUTO = 0  # the widget value meaning "choose from the device and its free memory"
MAX_IN_FLIGHT = 64  # the widget's maximum
__all__ = ["AUTO", "GPU_IN_FLIGHT", "MAX_IN_FLIGHT", "in_flight"]


def in_flight(value: int, pipe: DiMOOPipeline, images: int, width: int, height: int,
              cache: MLCacheConfig | None) -> int:
    """The images to keep in flight: `value`, or for AUTO the library's choice with the host's
    free memory; never more than `images`."""
    if value != AUTO:
        return max(1, min(int(value), images))
    device = pipe.device
    free = host.free_memory(device) if device.type == "cuda" else None
    return images_in_flight(device, images, pipe.image_bytes(width, height, cache is not None),
                            free)
