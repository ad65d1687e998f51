"""The painting tasks of the nano benchmarks: the test set's scenes as ground truth and, per task,
the masks to regenerate (lab/studies/painting.py describes the tasks)."""

from __future__ import annotations

import numpy as np

from lab.nano import scenes

__all__ = ["SIZE", "TASKS", "ground_truth", "task_masks"]

TASKS = ("object", "quarter", "half")
SIZE = scenes.IMAGE_SIZE


def ground_truth(n: int) -> tuple[list, list[str], np.ndarray, list[tuple]]:
    """Specs, captions, uint8 images [n, S, S, 3] and each item's objects."""
    specs = scenes.quality_test_specs(n)
    objects = [scenes.layout_scene(s, np.random.default_rng(scenes.TEST_IMAGE_SEED + i))
               for i, s in enumerate(specs)]
    images = np.stack([scenes.render(o) for o in objects])
    return specs, [scenes.caption_for(s) for s in specs], images, objects


def task_masks(task: str, objects: list[tuple]) -> np.ndarray:
    """float32 [n, S, S] masks, 1 = regenerate, drawn per item from seed TEST_IMAGE_SEED + i."""
    masks = np.zeros((len(objects), SIZE, SIZE), np.float32)
    half = SIZE // 2
    for i, objs in enumerate(objects):
        rng = np.random.default_rng([scenes.TEST_IMAGE_SEED + i, TASKS.index(task)])
        if task == "object":
            o = objs[int(rng.integers(len(objs)))]  # its box and one token around it
            top = int(round(o.cy - o.size / 2)) - scenes.CELL
            left = int(round(o.cx - o.size / 2)) - scenes.CELL
            side = o.size + 2 * scenes.CELL
            masks[i, max(0, top):top + side, max(0, left):left + side] = 1.0
        elif task == "quarter":
            q = int(rng.integers(4))
            masks[i, (q // 2) * half:(q // 2 + 1) * half, (q % 2) * half:(q % 2 + 1) * half] = 1
        elif task == "half":
            side = ("left", "right", "top", "bottom")[int(rng.integers(4))]
            rows = slice(0, half) if side == "top" else slice(half, SIZE) if side == "bottom" \
                else slice(0, SIZE)
            cols = slice(0, half) if side == "left" else slice(half, SIZE) if side == "right" \
                else slice(0, SIZE)
            masks[i, rows, cols] = 1.0
        else:
            raise ValueError(f"unknown task {task!r}; choose from {TASKS}")
    return masks
