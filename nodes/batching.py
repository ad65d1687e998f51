"""How many images the sampler node keeps in flight (its `max_batch` input, 0 = automatic).

A prompt list longer than that runs as a rolling batch: each finished image makes room for the
next prompt (ladr_core.sample's `max_batch`). Every image is the same whatever the number, so
the choice only trades speed and memory:

* on a GPU, a few images per pass fill the matrix units better (512 px: ~2,300 tokens per
  image), as long as they fit: the automatic choice is what the free memory holds
  (`DiMOOPipeline.image_bytes`, ML-Cache included), at most GPU_IN_FLIGHT;
* on a CPU a pass costs about the same per token whatever its size, so more images in flight
  gain nothing and the automatic choice is CPU_IN_FLIGHT (benchmarks/rolling.py).
"""

from __future__ import annotations

from typing import Any

from . import host

AUTO = 0  # the widget value meaning "choose from the device and its free memory"
GPU_IN_FLIGHT = 8
CPU_IN_FLIGHT = 4
MAX_IN_FLIGHT = 64  # the widget's maximum


def in_flight(value: int, pipe: Any, images: int, width: int | None, height: int | None,
              cache: object | None) -> int:
    """The images to keep in flight: `value`, or for AUTO the device's choice; never more
    than `images`."""
    if value != AUTO:
        return max(1, min(int(value), images))
    device = pipe.device
    if device.type == "cpu":
        return min(images, CPU_IN_FLIGHT)
    free = host.free_memory(device)
    cap = min(images, GPU_IN_FLIGHT)
    if free is None:
        return cap
    per_image = max(1, pipe.image_bytes(width, height, cache is not None))
    return max(1, min(cap, int(0.8 * free) // per_image))
