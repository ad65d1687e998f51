"""The built-in calibration prompts for Lumina-DiMOO (used when no prompt file is given).

How many: ``BUILTIN_COUNT`` = ``margin.prompts_needed(PRIOR_SPREAD, DEFAULT_MARGIN)``, at which
a setting as good as the reference qualifies 4 times out of 5 at the spread seen on DiMOO-nano;
with fewer, only the reference could ever be recommended.

What: the sixteen hand-written prompts (objects, counts, colours, spatial relations, text,
people, animals, scenes, styles), then prompts composed from the vocabularies below in a fixed
cycle of kinds (GenEval's six categories, scenes, styles, people, text), each drawn once from
a seeded generator: the same list on every machine, any first k of it a fair sample. A
calibration is only as good as its prompts' likeness to yours: pass your own with
``--prompts FILE``.
"""

from __future__ import annotations

import numpy as np

from .margin import DEFAULT_MARGIN, PRIOR_SPREAD, prompts_needed

__all__ = ["BUILTIN_COUNT", "BUILTIN_PROMPTS", "HANDWRITTEN", "builtin_prompts"]

HANDWRITTEN: tuple[str, ...] = (
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

OBJECTS = (
    "person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck", "boat",
    "traffic light", "fire hydrant", "stop sign", "bench", "bird", "cat", "dog", "horse",
    "sheep", "cow", "elephant", "bear", "zebra", "giraffe", "backpack", "umbrella", "handbag",
    "tie", "suitcase", "frisbee", "pair of skis", "snowboard", "kite", "baseball bat",
    "skateboard", "surfboard", "tennis racket", "bottle", "wine glass", "cup", "fork", "knife",
    "spoon", "bowl", "banana", "apple", "sandwich", "orange", "broccoli", "carrot", "hot dog",
    "pizza", "donut", "cake", "chair", "couch", "potted plant", "bed", "dining table",
    "toilet", "tv", "laptop", "computer mouse", "remote", "keyboard", "cell phone",
    "microwave", "oven", "toaster", "sink", "refrigerator", "book", "clock", "vase",
    "pair of scissors", "teddy bear", "hair drier", "toothbrush",
)
COLORS = ("red", "orange", "yellow", "green", "blue", "purple", "pink", "brown", "black",
          "white")
COUNTS = ("two", "three", "four")
RELATIONS = ("to the left of", "to the right of", "above", "below")
PLACES = (
    "a busy market street", "a quiet beach at dawn", "a misty pine forest", "a desert canyon",
    "a snowy mountain pass", "a cosy library", "a modern kitchen", "a rainy train platform",
    "a rooftop garden", "a sunflower field", "a harbour full of fishing boats",
    "a medieval castle courtyard", "an underwater coral reef", "a neon-lit alley at night",
    "a frozen lake", "a tropical waterfall", "a classroom", "a football stadium",
    "a night sky over a campsite", "an old bookshop", "a greenhouse", "a subway car",
    "a foggy bridge", "a lavender field", "a volcano at dusk", "a bakery window",
)
STYLES = (
    "an oil painting", "a watercolor painting", "a pencil sketch", "a pixel art image",
    "a low-poly 3D render", "a studio photograph", "an anime illustration",
    "a vintage poster", "a charcoal drawing", "a claymation still", "a stained glass window",
    "a woodblock print", "a macro photograph", "an isometric illustration",
)
PEOPLE = (
    "a young woman with curly hair", "an old fisherman", "a child in a yellow raincoat",
    "a chef in a white hat", "a street musician with a violin", "a farmer holding a basket",
    "a dancer in a red dress", "a firefighter", "a scientist in a lab coat",
    "a skateboarder mid-jump", "a grandmother knitting", "a runner crossing a finish line",
)
WORDS = ("HELLO", "OPEN", "SALE", "CAFE", "LADR", "EXIT", "WELCOME", "STOP", "BOOKS", "2025")
SURFACES = ("a wooden sign", "a chalkboard", "a neon sign", "a coffee cup", "a t-shirt",
            "a street banner", "a birthday cake", "a book cover")
KINDS = ("single", "two", "count", "color", "position", "attribute", "scene", "style",
         "person", "text")
SEED = 20250101


def _a(word: str) -> str:
    return ("an " if word[0] in "aeiou" else "a ") + word


def _plural(word: str) -> str:
    if word.startswith("pair of "):
        return "pairs of " + word[len("pair of "):]
    if word == "person":
        return "people"
    if word.endswith(("s", "sh", "ch")):
        return word + "es"
    return word[:-1] + "ies" if word.endswith("y") and word[-2] not in "aeiou" else word + "s"


def _compose(kind: str, rng: np.random.Generator) -> str:
    def pick(seq: tuple[str, ...]) -> str:
        return seq[int(rng.integers(len(seq)))]

    obj, other = (OBJECTS[int(i)] for i in rng.choice(len(OBJECTS), 2, replace=False))
    color, color2 = (COLORS[int(i)] for i in rng.choice(len(COLORS), 2, replace=False))
    if kind == "single":
        return f"a photo of {_a(obj)}"
    if kind == "two":
        return f"a photo of {_a(obj)} and {_a(other)}"
    if kind == "count":
        return f"a photo of {pick(COUNTS)} {_plural(obj)}"
    if kind == "color":
        return f"a photo of {_a(color + ' ' + obj)}"
    if kind == "position":
        return f"a photo of {_a(obj)} {pick(RELATIONS)} {_a(other)}"
    if kind == "attribute":
        return f"a photo of {_a(color + ' ' + obj)} and {_a(color2 + ' ' + other)}"
    if kind == "scene":
        return f"{_a(obj)} in {pick(PLACES)}"
    if kind == "style":
        return f"{pick(STYLES)} of {_a(obj)} in {pick(PLACES)}"
    if kind == "person":
        return f"{pick(PEOPLE)} with {_a(obj)}, {pick(PLACES)} in the background"
    return f"{pick(SURFACES)} with the word {pick(WORDS)} written on it"


def builtin_prompts(n: int) -> tuple[str, ...]:
    """The first ``n`` built-in prompts: ``HANDWRITTEN``, then composed ones (module
    docstring), no prompt twice."""
    out = list(HANDWRITTEN[:n])
    seen = set(out)
    rng = np.random.default_rng(SEED)
    k = 0
    while len(out) < n:
        text = _compose(KINDS[k % len(KINDS)], rng)
        k += 1
        if text not in seen:
            seen.add(text)
            out.append(text)
    return tuple(out)


BUILTIN_COUNT = max(len(HANDWRITTEN), prompts_needed(PRIOR_SPREAD, DEFAULT_MARGIN))
BUILTIN_PROMPTS: tuple[str, ...] = builtin_prompts(BUILTIN_COUNT)
