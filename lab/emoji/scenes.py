"""Emoji scenes with known truth and GenEval-style captions, and the prompt splits.

A scene pastes 1-3 emoji, each `SIZE` px (4 x 4 VQ tokens) at a corner on the 4 px token grid,
at least `GAP` px apart, on a white `CANVAS` px canvas. Categories (GenEval's, on emoji):
single object ("a red apple"), two objects ("a banana and a star"), counting 1-3 ("three
stars"), position ("a banana to the left of a star") and colours: two emoji of one kind in two
colours ("a red heart and a blue heart"), where only the colour tells them apart. The caption is
a pure function of the spec, so a judge checks any picture against the same spec.

Splits. Of the 276 unordered emoji pairs, a seeded 10 % are test-only and another 10 %
validation-only: no training scene holds them together (two objects, colours, position). Of
the remaining pairs' placements (which one is left / above), a seeded 10 % are test-only, so
the test set also asks relations of seen pairs that training never drew (a left of b and b
right of a are one placement). Styles: the model is trained and tuned on Noto and Twemoji
(`MODEL_STYLES`); test pictures (image to image, understanding, the judge) are OpenMoji's.
All randomness comes from an explicit `numpy.random.Generator`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from lab.emoji.bank import SPRITE, Bank
from lab.emoji.vocab import KINDS, VOCAB

CANVAS, SIZE, CELL, GAP = 48, SPRITE, 4, 4
BACKGROUND = (255, 255, 255)
CATEGORIES = ("single_object", "two_object", "counting", "position", "colors")
SPLITS = ("train", "validation", "test")
MODEL_STYLES, TEST_STYLE = ("noto", "twemoji"), "openmoji"
NUMBERS = ("one", "two", "three")
RELATIONS = ("left of", "right of", "above", "below")
RELATION_WORDS = {"left of": "to the left of", "right of": "to the right of",
                  "above": "above", "below": "below"}
RELATION_MIN_PX = 8       # generator: centre offset along the relation axis
SPLIT_SEED, HELD_FRACTION = 20261129, 0.1


@dataclass(frozen=True)
class Spec:
    """What a caption asks for: emoji indices (counting: one index repeated); `relation` says
    objects[0] <relation> objects[1]."""

    category: str
    objects: tuple[int, ...]
    relation: str | None = None


@dataclass(frozen=True)
class Placed:
    emoji: int
    x: int            # top-left corner, px
    y: int

    @property
    def centre(self) -> tuple[float, float]:
        return self.x + SIZE / 2, self.y + SIZE / 2


@dataclass(frozen=True)
class Scene:
    spec: Spec
    caption: str
    placed: tuple[Placed, ...]


def _noun(i: int) -> str:
    name = VOCAB[i].name
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def caption_for(spec: Spec) -> str:
    """The caption of a spec (lower case, no final period)."""
    objs = spec.objects
    if spec.category == "counting":
        e = VOCAB[objs[0]]
        return f"{NUMBERS[len(objs) - 1]} {e.plural if len(objs) > 1 else e.name}"
    if spec.category == "position":
        return f"{_noun(objs[0])} {RELATION_WORDS[spec.relation]} {_noun(objs[1])}"
    return " and ".join(_noun(i) for i in objs)


def placement_key(a: int, b: int, relation: str) -> tuple[int, int, str]:
    """One key for a placement however it is worded: (first on the axis, second, axis)."""
    axis = "h" if relation in ("left of", "right of") else "v"
    first = relation in ("left of", "above")
    return (a, b, axis) if first else (b, a, axis)


def _split_tables() -> tuple[dict, dict]:
    """pair (frozenset) -> split, and held-out placement key -> split."""
    rng = np.random.default_rng(SPLIT_SEED)
    pairs = [frozenset(p) for p in itertools.combinations(range(len(VOCAB)), 2)]
    order = rng.permutation(len(pairs))
    n = int(len(pairs) * HELD_FRACTION)
    pair_split = {pairs[i]: "test" for i in order[:n]}
    pair_split.update({pairs[i]: "validation" for i in order[n:2 * n]})
    keys = [k for p in pairs if p not in pair_split for a, b in itertools.permutations(sorted(p))
            for k in [(a, b, "h"), (a, b, "v")]]
    picked = rng.choice(len(keys), size=int(len(keys) * HELD_FRACTION), replace=False)
    return pair_split, {keys[i]: "test" for i in picked}


PAIR_SPLIT, KEY_SPLIT = _split_tables()


def spec_split(spec: Spec) -> str:
    """The only split a spec may appear in ('train' also for specs every split shares)."""
    if len(set(spec.objects)) < 2:
        return "train"
    a, b = spec.objects[:2]
    held = PAIR_SPLIT.get(frozenset((a, b)))
    if held:
        return held
    if spec.relation:
        return KEY_SPLIT.get(placement_key(a, b, spec.relation), "train")
    return "train"


def _pairs(category: str, split: str) -> list[tuple[int, int]]:
    """Ordered pairs a `category` spec of `split` may draw (colours: one kind, two colours)."""
    if category == "colors":
        cands = [p for k in KINDS.values() for p in itertools.permutations(k, 2)]
    else:
        cands = list(itertools.permutations(range(len(VOCAB)), 2))
    own = [p for p in cands if PAIR_SPLIT.get(frozenset(p), "train") == split]
    if split == "test" and category == "position":   # seen pairs in unseen placements too
        own += [p for p in cands if frozenset(p) not in PAIR_SPLIT]
    return own


def random_spec(rng: np.random.Generator, category: str, split: str = "train") -> Spec:
    """Draw a spec of `category` that belongs to `split` (see the module's split rules)."""
    if category not in CATEGORIES or split not in SPLITS:
        raise ValueError(f"category {category!r} / split {split!r}: use one of {CATEGORIES} / {SPLITS}")
    if category in ("single_object", "counting"):
        e = int(rng.integers(len(VOCAB)))
        n = int(rng.integers(1, 4)) if category == "counting" else 1
        return Spec(category, (e,) * n)
    pairs = _pairs(category, split)
    for _ in range(10000):
        a, b = pairs[rng.integers(len(pairs))]
        rel = RELATIONS[rng.integers(4)] if category == "position" else None
        spec = Spec(category, (a, b), rel)
        if spec_split(spec) == split:
            return spec
    raise RuntimeError(f"no {category} spec for split {split}")


def relation_holds(relation: str, a: tuple[float, float], b: tuple[float, float],
                   min_px: float) -> bool:
    """Centre `a` is `relation` of centre `b`: offset >= min_px on the axis, which dominates."""
    dx, dy = b[0] - a[0], b[1] - a[1]
    along, across = {"left of": (dx, dy), "right of": (-dx, dy),
                     "above": (dy, dx), "below": (-dy, dx)}[relation]
    return along >= min_px and abs(along) > abs(across)


def _apart(p: tuple[int, int], q: tuple[int, int]) -> bool:
    return abs(p[0] - q[0]) >= SIZE + GAP or abs(p[1] - q[1]) >= SIZE + GAP


def layout(rng: np.random.Generator, spec: Spec) -> tuple[Placed, ...]:
    """Corners on the token grid, every pair `GAP` px apart, the relation held."""
    slots = (CANVAS - SIZE) // CELL + 1
    for _ in range(1000):
        pts = [tuple(int(v) * CELL for v in rng.integers(slots, size=2)) for _ in spec.objects]
        if not all(_apart(p, q) for p, q in itertools.combinations(pts, 2)):
            continue
        placed = tuple(Placed(e, x, y) for e, (x, y) in zip(spec.objects, pts, strict=True))
        if spec.relation and not relation_holds(spec.relation, placed[0].centre,
                                                placed[1].centre, RELATION_MIN_PX):
            continue
        return placed
    raise RuntimeError(f"no layout found for {spec}")


def make_scene(rng: np.random.Generator, category: str, split: str = "train") -> Scene:
    spec = random_spec(rng, category, split)
    return Scene(spec, caption_for(spec), layout(rng, spec))


TEST_SEED, VAL_SEED = 9, 8
"""The spec seeds of the emoji harness's prompts (lab.emoji.verdicts, guidance, ship):
``prompt_scenes(n, "test", TEST_SEED)`` and ``prompt_scenes(n, "validation", VAL_SEED)``."""


def prompt_scenes(n: int, split: str, seed: int) -> list[Scene]:
    """`n` scenes of `split`, the categories in turn."""
    rng = np.random.default_rng(seed)
    return [make_scene(rng, CATEGORIES[i % len(CATEGORIES)], split) for i in range(n)]


def render(bank: Bank, style: str, placed: tuple[Placed, ...]) -> np.ndarray:
    """uint8 [CANVAS, CANVAS, 3]: the style's sprites alpha-composited on the background."""
    s = bank.style_index(style)
    img = np.empty((CANVAS, CANVAS, 3), dtype=np.float32)
    img[:] = BACKGROUND
    for p in placed:
        sprite = bank.sprites[s, p.emoji].astype(np.float32)
        alpha = sprite[..., 3:] / 255.0
        box = img[p.y:p.y + SIZE, p.x:p.x + SIZE]
        box[:] = sprite[..., :3] * alpha + box * (1 - alpha)
    return img.round().astype(np.uint8)


def make_dataset(bank: Bank, n: int, seed: int, split: str = "train",
                 styles: tuple[str, ...] = MODEL_STYLES) -> tuple[np.ndarray, list[Scene]]:
    """`n` scenes (categories in turn, styles drawn) -> uint8 [n, CANVAS, CANVAS, 3], scenes."""
    rng = np.random.default_rng(seed)
    images, scenes = np.empty((n, CANVAS, CANVAS, 3), dtype=np.uint8), []
    for i in range(n):
        sc = make_scene(rng, CATEGORIES[i % len(CATEGORIES)], split)
        images[i] = render(bank, styles[int(rng.integers(len(styles)))], sc.placed)
        scenes.append(sc)
    return images, scenes


def vocabulary_words() -> list[str]:
    """Every word a caption can use (for the tokenizer)."""
    words = {w for e in VOCAB for w in f"{e.name} {e.plural}".split()}
    words |= set(NUMBERS) | {"a", "an", "and", "to", "the"}
    words |= {w for r in RELATION_WORDS.values() for w in r.split()}
    return sorted(words)
