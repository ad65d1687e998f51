"""Seeded procedural scenes with GenEval-style captions (the DiMOO-nano training data).

A scene is 1-4 flat-coloured shapes (circle, square, upright triangle) on a plain background,
rendered without anti-aliasing at `IMAGE_SIZE` x `IMAGE_SIZE` pixels. Shape boxes are 3 or 4
VQ tokens wide and start on the VQ token grid (`CELL` px), so every token patch shows one of a
finite set of shape parts: the transformer then learns which parts go together instead of the
sub-token position of every edge (the first nano model, with free placement, drew blobs). Each scene comes from a
`Spec` (category, the objects the caption names, an optional spatial relation) and the caption
is a pure function of the spec, so the evaluator can check any image against the same spec.

Categories follow GenEval (Ghosh et al., 2023): single object, two objects, counting (1-4),
colours, position (left of / right of / above / below) and colour attribution. A small set of
colour-attribution combinations is held out from training (`is_heldout`). Prompt sets:
`validation_specs` (tuning), `quality_test_specs` (the quality benchmark: seen and unseen
colour-shape pairs as separate groups, seeds disjoint from tuning) and the older `heldout_specs`.
All randomness comes from an explicit `numpy.random.Generator`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

IMAGE_SIZE = 48
BACKGROUND = (240, 240, 235)
COLORS: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40),
    "green": (40, 165, 70),
    "blue": (40, 90, 225),
    "yellow": (240, 205, 30),
    "purple": (145, 60, 195),
    "orange": (245, 135, 30),
}
SHAPES = ("circle", "square", "triangle")
CATEGORIES = ("single_object", "two_object", "counting", "colors", "position", "color_attr")
NUMBERS = ("one", "two", "three", "four")
RELATIONS = ("left of", "right of", "above", "below")
RELATION_WORDS = {"left of": "to the left of", "right of": "to the right of",
                  "above": "above", "below": "below"}
CELL = 4                # px per VQ token (factor 4): box corners and sides are multiples of it
SIZES = (12, 16)        # bounding-box side in px (3 or 4 tokens)
GAP = 4                 # min px between bounding boxes (one VQ token)
MARGIN = 4              # min px between a shape and the image border (one VQ token)
RELATION_MIN_PX = 10    # generator: centre offset along the relation axis (evaluator is laxer)
HELDOUT_SEED = 20261121
HELDOUT_FRACTION = 0.1


@dataclass(frozen=True)
class Spec:
    """What a caption asks for: `objects` = ((shape, colour or None), ...); `relation` says
    objects[0] <relation> objects[1] (position category only)."""

    category: str
    objects: tuple[tuple[str, str | None], ...]
    relation: str | None = None


@dataclass(frozen=True)
class Obj:
    """One rendered shape: centre (cx, cy) and bounding-box side `size`, in pixels."""

    shape: str
    color: str
    cx: float
    cy: float
    size: int


@dataclass(frozen=True)
class Scene:
    spec: Spec
    caption: str
    objects: tuple[Obj, ...]


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def _noun(shape: str, color: str | None) -> str:
    words = f"{color} {shape}" if color else shape
    return f"{_article(words)} {words}"


def caption_for(spec: Spec) -> str:
    """The caption of a spec (deterministic, lower case, no final period)."""
    objs = spec.objects
    if spec.category == "counting":
        n = len(objs)
        return f"{NUMBERS[n - 1]} {objs[0][0]}{'s' if n > 1 else ''}"
    if spec.category == "position":
        return f"{_noun(*objs[0])} {RELATION_WORDS[spec.relation]} {_noun(*objs[1])}"
    return " and ".join(_noun(*o) for o in objs)


def _color_attr_combos() -> list[tuple[tuple[str, str], tuple[str, str]]]:
    combos = []
    for s1, s2 in itertools.combinations(SHAPES, 2):
        for c1, c2 in itertools.permutations(COLORS, 2):
            combos.append(((s1, c1), (s2, c2)))
    return combos


def _heldout_set() -> frozenset:
    combos = _color_attr_combos()
    rng = np.random.default_rng(HELDOUT_SEED)
    picked = rng.choice(len(combos), size=max(1, int(len(combos) * HELDOUT_FRACTION)), replace=False)
    return frozenset(frozenset(combos[i]) for i in picked)


HELDOUT_COLOR_ATTR = _heldout_set()


def is_heldout(spec: Spec) -> bool:
    """True for colour-attribution specs whose (shape, colour) pair set is never trained on."""
    if spec.category != "color_attr":
        return False
    return frozenset((s, c) for s, c in spec.objects) in HELDOUT_COLOR_ATTR


def _colors(rng: np.random.Generator, n: int, distinct: bool = False) -> list[str]:
    names = list(COLORS)
    idx = rng.choice(len(names), size=n, replace=not distinct)
    return [names[i] for i in idx]


def random_spec(rng: np.random.Generator, category: str) -> Spec:
    """Draw a spec of `category` (colour None = the caption leaves the colour free)."""
    if category not in CATEGORIES:
        raise ValueError(f"category {category!r} is not one of {CATEGORIES}")
    shapes = [SHAPES[i] for i in rng.permutation(len(SHAPES))]
    if category == "single_object":
        return Spec(category, ((shapes[0], None),))
    if category == "two_object":
        return Spec(category, ((shapes[0], None), (shapes[1], None)))
    if category == "counting":
        n = int(rng.integers(1, 5))
        return Spec(category, tuple((shapes[0], None) for _ in range(n)))
    if category == "colors":
        return Spec(category, ((shapes[0], _colors(rng, 1)[0]),))
    if category == "position":
        rel = RELATIONS[int(rng.integers(len(RELATIONS)))]
        return Spec(category, ((shapes[0], None), (shapes[1], None)), rel)
    c1, c2 = _colors(rng, 2, distinct=True)
    return Spec(category, ((shapes[0], c1), (shapes[1], c2)))


def relation_holds(rel: str, a: tuple[float, float], b: tuple[float, float], min_px: float,
                   slack: float = 0.0) -> bool:
    """`a rel b` on centres (x right, y down): offset along the axis >= min_px and that axis
    dominates (|dx| >= |dy| + slack for left/right, |dy| >= |dx| + slack for above/below).
    The generator asks for `slack` so that pixel-level centres (the evaluator's) never tie."""
    dx, dy = b[0] - a[0], b[1] - a[1]
    if rel == "left of":
        return dx >= min_px and abs(dx) >= abs(dy) + slack
    if rel == "right of":
        return -dx >= min_px and abs(dx) >= abs(dy) + slack
    if rel == "above":
        return dy >= min_px and abs(dy) >= abs(dx) + slack
    if rel == "below":
        return -dy >= min_px and abs(dy) >= abs(dx) + slack
    raise ValueError(f"relation {rel!r} is not one of {RELATIONS}")


def _place(rng: np.random.Generator, sizes: list[int]) -> list[tuple[float, float]] | None:
    """Centres for boxes of the given sides: corners on the CELL grid, inside the image MARGIN
    from the border, pairwise GAP apart."""
    boxes: list[tuple[float, float, int]] = []
    for s in sizes:
        for _ in range(60):
            hi = (IMAGE_SIZE - MARGIN - s) // CELL       # last allowed corner, in cells
            x0, y0 = (int(v) * CELL for v in rng.integers(MARGIN // CELL, hi + 1, size=2))
            cx, cy = x0 + s / 2, y0 + s / 2
            if all(abs(cx - bx) >= (s + bs) / 2 + GAP or abs(cy - by) >= (s + bs) / 2 + GAP
                   for bx, by, bs in boxes):
                boxes.append((cx, cy, s))
                break
        else:
            return None
    return [(b[0], b[1]) for b in boxes]


def layout_scene(spec: Spec, rng: np.random.Generator) -> tuple[Obj, ...]:
    """Sample sizes, free colours and positions that realise `spec` (rejection sampling)."""
    for _ in range(500):
        sizes = [SIZES[int(rng.integers(len(SIZES)))] for _ in spec.objects]
        centres = _place(rng, sizes)
        if centres is None:
            continue
        if spec.relation and not relation_holds(spec.relation, centres[0], centres[1], RELATION_MIN_PX,
                                                  slack=CELL / 2):
            continue
        free = _colors(rng, len(spec.objects))
        return tuple(Obj(shape, color or free[i], cx, cy, s)
                     for i, ((shape, color), (cx, cy), s) in enumerate(zip(spec.objects, centres, sizes, strict=True)))
    raise RuntimeError(f"could not lay out {spec} in 500 tries")


def shape_mask(obj: Obj, size: int = IMAGE_SIZE) -> np.ndarray:
    """Bool [size, size] pixel mask of one shape (pixel centres at +0.5)."""
    ys, xs = np.mgrid[0:size, 0:size] + 0.5
    h = obj.size / 2
    if obj.shape == "circle":
        return (xs - obj.cx) ** 2 + (ys - obj.cy) ** 2 <= h * h
    if obj.shape == "square":
        return (np.abs(xs - obj.cx) <= h) & (np.abs(ys - obj.cy) <= h)
    if obj.shape == "triangle":  # apex on top, base at the bottom of the box
        top, bottom = obj.cy - h, obj.cy + h
        half_width = (ys - top) / (2 * h) * h
        return (ys >= top) & (ys <= bottom) & (np.abs(xs - obj.cx) <= half_width)
    raise ValueError(f"shape {obj.shape!r} is not one of {SHAPES}")


def render(objects: tuple[Obj, ...], size: int = IMAGE_SIZE) -> np.ndarray:
    """uint8 [size, size, 3] image of the objects on the plain background."""
    img = np.empty((size, size, 3), dtype=np.uint8)
    img[:] = BACKGROUND
    for obj in objects:
        img[shape_mask(obj, size)] = COLORS[obj.color]
    return img


def training_spec(rng: np.random.Generator, category: str) -> Spec:
    """A spec of `category` drawn like the training data: held-out combinations are redrawn."""
    spec = random_spec(rng, category)
    while is_heldout(spec):
        spec = random_spec(rng, category)
    return spec


def make_scene(rng: np.random.Generator, category: str | None = None,
               allow_heldout: bool = False) -> Scene:
    """One scene; category None draws one uniformly. Held-out specs are redrawn unless allowed."""
    cat = category or CATEGORIES[int(rng.integers(len(CATEGORIES)))]
    spec = random_spec(rng, cat) if allow_heldout else training_spec(rng, cat)
    return Scene(spec, caption_for(spec), layout_scene(spec, rng))


def with_colors_named(scene: Scene) -> Scene:
    """The same scene with every object's rendered colour written into spec and caption
    ("a red circle to the left of a blue square"); the image is unchanged."""
    spec = Spec(scene.spec.category, tuple((o.shape, o.color) for o in scene.objects),
                scene.spec.relation)
    return Scene(spec, caption_for(spec), scene.objects)


def make_dataset(n: int, seed: int) -> tuple[np.ndarray, list[Scene]]:
    """`n` training scenes (never held-out specs): uint8 images [n, S, S, 3] and the scenes.

    Every second position scene names its colours (`with_colors_named`), so prompts like the
    README's "a red circle to the left of a blue square" are in the training distribution; this
    draws nothing from `rng`, so the images equal those of the plain captions.
    """
    rng = np.random.default_rng(seed)
    scenes = [make_scene(rng) for _ in range(n)]
    scenes = [with_colors_named(s) if s.spec.category == "position" and i % 2 == 0 else s
              for i, s in enumerate(scenes)]
    return np.stack([render(s.objects) for s in scenes]), scenes


def heldout_specs(n: int, seed: int = 7) -> list[Spec]:
    """The benchmark prompt set: `n` specs cycling through CATEGORIES; colour attribution uses
    only held-out combinations (never trained), other categories fresh draws from `seed`."""
    if n <= 0:
        raise ValueError(f"n must be positive (got {n})")
    rng = np.random.default_rng(seed)
    held = sorted(HELDOUT_COLOR_ATTR, key=lambda s: sorted(s))
    specs = []
    for i in range(n):
        cat = CATEGORIES[i % len(CATEGORIES)]
        if cat == "color_attr":
            pair = sorted(held[int(rng.integers(len(held)))])
            order = rng.permutation(2)
            specs.append(Spec(cat, tuple(pair[j] for j in order)))
        else:
            specs.append(random_spec(rng, cat))
    return specs


def validation_specs(n: int, seed: int = 8) -> list[Spec]:
    """A tuning prompt set (e.g. for the guidance scale): `n` specs cycling through CATEGORIES,
    drawn like training specs (held-out combinations excluded), disjoint in purpose from the
    benchmark's `heldout_specs`, which nothing may be tuned on."""
    if n <= 0:
        raise ValueError(f"n must be positive (got {n})")
    rng = np.random.default_rng(seed)
    return [training_spec(rng, CATEGORIES[i % len(CATEGORIES)]) for i in range(n)]


TEST_SPEC_SEED = 9
TEST_IMAGE_SEED = 100_000
"""Test prompts draw their specs from TEST_SPEC_SEED (validation: 8, `heldout_specs`: 7) and are
generated with image seeds TEST_IMAGE_SEED + index (validation / tuning: seed = index < 100000),
so no (caption, seed) item of the test set is ever seen while tuning."""
TEST_GROUPS = ("single_object", "two_object", "counting", "colors", "position",
               "color_attr_seen", "color_attr_unseen")
"""Report groups: the GenEval categories, colour attribution split into colour-shape pair sets
of the training distribution (seen) and the held-out ones no training scene contains (unseen)."""


def group_of(spec: Spec) -> str:
    """The report group of a spec (`TEST_GROUPS`)."""
    if spec.category != "color_attr":
        return spec.category
    return "color_attr_unseen" if is_heldout(spec) else "color_attr_seen"


def _heldout_color_attr(rng: np.random.Generator) -> Spec:
    held = sorted(HELDOUT_COLOR_ATTR, key=lambda s: sorted(s))
    pair = sorted(held[int(rng.integers(len(held)))])
    order = rng.permutation(2)
    return Spec("color_attr", tuple(pair[j] for j in order))


def quality_test_specs(n: int, seed: int = TEST_SPEC_SEED) -> list[Spec]:
    """The test prompt set: `n` specs cycling through `TEST_GROUPS` (so colour attribution is
    2/7 of it: seen pairs drawn like training specs, unseen pairs from the held-out set). Never
    used for tuning; generate item i with seed TEST_IMAGE_SEED + i."""
    if n <= 0:
        raise ValueError(f"n must be positive (got {n})")
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        group = TEST_GROUPS[i % len(TEST_GROUPS)]
        if group == "color_attr_unseen":
            out.append(_heldout_color_attr(rng))
            continue
        out.append(training_spec(rng, "color_attr" if group == "color_attr_seen" else group))
    return out


def vocabulary_words() -> list[str]:
    """Every word any caption can contain (sorted), for the word-level tokenizer."""
    words = set(NUMBERS) | set(COLORS) | {"a", "an", "and", "to", "the"}
    words |= set(SHAPES) | {s + "s" for s in SHAPES}
    for rel in RELATION_WORDS.values():
        words |= set(rel.split())
    return sorted(words)


def part_catalogue() -> np.ndarray:
    """uint8 [len(SHAPES) * len(SIZES) * len(COLORS), S, S, 3]: each shape at each size and colour
    once. Boxes sit on the CELL grid and never overlap, so a token patch of any scene is either
    flat background or a patch of one of these images: they hold every patch a scene can have."""
    out = []
    for shape in SHAPES:
        for size in SIZES:
            for color in COLORS:
                c = MARGIN + size / 2
                out.append(render((Obj(shape, color, c, c, size),)))
    return np.stack(out)


def prompt_set(name: str, n: int) -> tuple[list, int]:
    """(specs, seed of item 0) of the named prompt set."""
    if name == "test":
        return quality_test_specs(n), TEST_IMAGE_SEED
    return validation_specs(n), 0


def separation(specs: list, seed0: int, validation_n: int = 288) -> dict[str, Any]:
    """How the prompts relate to the tuning set (`validation_specs(validation_n)`, seeds 0..)."""
    val = [caption_for(s) for s in validation_specs(validation_n)]
    caps = [caption_for(s) for s in specs]
    shared_items = len({(c, seed0 + i) for i, c in enumerate(caps)}
                       & {(c, i) for i, c in enumerate(val)})
    return {"tuning_set": f"validation_specs({validation_n}), spec seed 8, image seeds 0..",
            "shared_caption_seed_items": shared_items,
            "captions_also_in_tuning_set": sum(c in set(val) for c in caps)}


def _every_spec() -> list[Spec]:
    """Every spec a caption can come from: each category's objects, colour-named position specs
    (`with_colors_named`) included."""
    named = [(s, None) for s in SHAPES] + [(s, c) for s in SHAPES for c in COLORS]
    specs = [Spec("single_object", ((s, None),)) for s in SHAPES]
    specs += [Spec("colors", ((s, c),)) for s in SHAPES for c in COLORS]
    specs += [Spec("counting", ((s, None),) * n) for s in SHAPES for n in range(1, 5)]
    for a, b in itertools.permutations(SHAPES, 2):
        specs.append(Spec("two_object", ((a, None), (b, None))))
        specs += [Spec("color_attr", ((a, c1), (b, c2)))
                  for c1, c2 in itertools.permutations(COLORS, 2)]
    specs += [Spec("position", (o1, o2), rel) for o1 in named for o2 in named
              for rel in RELATIONS if o1[0] != o2[0] and (o1[1] is None) == (o2[1] is None)]
    return specs


def spec_of_caption(caption: str) -> Spec:
    """The spec whose caption (`caption_for`) is `caption`, e.g. to score a template's prompt
    with the evaluator; ValueError for a prompt no nano caption reads like."""
    text = " ".join(caption.lower().split()).rstrip(".")
    found = next((s for s in _every_spec() if caption_for(s) == text), None)
    if found is None:
        raise ValueError(f"prompt {caption!r} is no caption of the nano scenes (lab.nano.scenes"
                         ".caption_for): the evaluator cannot score it")
    return found
