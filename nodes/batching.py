"""How many images the sampler nodes keep in flight (`max_batch`, 0 = automatic); more roll in
as images finish (ladr_core.sample's `max_batch`). It trades speed for memory: images are the
same in float32 on a CPU, on a GPU nearly always (docs/ARCHITECTURE.md section 3). The automatic
choice is the library's (`images_in_flight`) fed with ComfyUI's count of free memory.
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
    """`value`, or for AUTO the library's choice with the host's free memory; at most `images`."""
    if value != AUTO:
        return max(1, min(int(value), images))
    return images_in_flight(pipe.device, images,
                            pipe.image_bytes(width, height, cache is not None),
                            host.free_memory(pipe.device))
