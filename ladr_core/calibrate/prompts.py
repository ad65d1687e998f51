"""The built-in calibration prompts for Lumina-DiMOO (used when no prompt file is given).

Sixteen prompts spanning what DiMOO is asked for: single objects, counts, colours, spatial
relations, rendered text, people, animals, scenes and styles. A calibration is only as good as
its prompts' likeness to yours: pass your own with ``--prompts FILE``.
"""

from __future__ import annotations

BUILTIN_PROMPTS: tuple[str, ...] = (
    "a photo of a red apple on a wooden table",
    "a cat sitting on a windowsill in soft morning light",
    "two dogs playing in fresh snow",
    "a blue car parked next to a yellow bicycle",
    "a bowl of ramen with chopsticks, seen from above",
    "a lighthouse on a rocky coast at sunset",
    "three red balloons floating in a clear blue sky",
    "a studio portrait of an elderly man with a white beard",
    "a green vase with sunflowers on a kitchen counter",
    "a snowy mountain village at night with warm lights in the windows",
    "a wooden sign with the word OPEN painted on it",
    "a teddy bear to the left of a laptop on a desk",
    "an astronaut riding a horse on the moon, digital art",
    "a pink flamingo standing in shallow water",
    "a city street in the rain with neon reflections",
    "a watercolor painting of a fox in an autumn forest",
)
