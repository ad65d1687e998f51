"""Questions about nano scenes whose answers are known: what DiMOO-nano-mmu learns and is scored on.

Five kinds, each a short question with a short answer in the nano vocabulary:

* ``caption``  "describe the image." -> the scene's canonical description (`describe`): one
  object "a red circle"; same-shape objects "three circles"; two shapes left to right, joined by
  the relation that holds on the centres (generator strictness) or by "and";
* ``color``    "what color is the circle?" -> "red" (asked of a shape the scene shows once);
* ``shape``    "what shape is the red object?" -> "circle" (a colour the scene shows once);
* ``count``    "how many circles are there?" -> "zero" .. "four" (any shape, present or not);
* ``position`` "is the circle to the left of the square?" -> "yes" / "no" (two objects of
  different shapes whose centres satisfy exactly one relation with the generator's margin).

Answers are scored by `is_correct`: exact words, except a caption, which passes when it names
the scene's objects (shape, and colour where it names one) one to one and any relation it states
holds on the true centres (lab.nano.scenes.spec_of_caption parses it). Test scenes are the
quality test set's specs (`quality_test_specs`) laid out with image seed TEST_IMAGE_SEED + i, so
no item of it is a tuning or training item (training scenes come from their own seed). Every
draw takes an explicit `numpy.random.Generator`.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from dataclasses import dataclass

import numpy as np

from lab.nano import scenes
from lab.nano.evaluator import RELATION_EVAL_PX
from lab.nano.scenes import NUMBERS, RELATION_MIN_PX, RELATION_WORDS, RELATIONS, SHAPES

KINDS = ("caption", "color", "shape", "count", "position")
COUNT_WORDS = ("zero", *NUMBERS)
MARGIN = scenes.CELL / 2  # the generator's slack: relations hold or fail clearly


@dataclass(frozen=True)
class Question:
    """One question about one scene: its kind, its text and the expected answer's words."""

    kind: str
    text: str
    answer: str


def _relation(a: scenes.Obj, b: scenes.Obj) -> str | None:
    """The one relation `a rel b` that holds with the generator's margin, else None."""
    held = [r for r in RELATIONS
            if scenes.relation_holds(r, (a.cx, a.cy), (b.cx, b.cy), RELATION_MIN_PX, MARGIN)]
    return held[0] if len(held) == 1 else None


def _named(o: scenes.Obj) -> tuple[str, str]:
    return (o.shape, o.color)


def describe(objects: tuple[scenes.Obj, ...]) -> str:
    """The canonical description of what a scene shows (a nano caption; see module doc)."""
    objs = sorted(objects, key=lambda o: (o.cx, o.cy))
    if len({o.shape for o in objs}) == 1 and len(objs) > 1:
        return scenes.caption_for(scenes.Spec("counting", tuple((o.shape, None) for o in objs)))
    if len(objs) == 1:
        return scenes.caption_for(scenes.Spec("colors", (_named(objs[0]),)))
    if len(objs) == 2 and _relation(*objs) is not None:
        return scenes.caption_for(scenes.Spec("position", tuple(map(_named, objs)),
                                              _relation(*objs)))
    return scenes.caption_for(scenes.Spec("color_attr", tuple(map(_named, objs))))


def _plural(shape: str) -> str:
    return shape + "s"


def _unique(values: list[str]) -> list[str]:
    counts = Counter(values)
    return [v for v in dict.fromkeys(values) if counts[v] == 1]


def ask(scene: scenes.Scene, kind: str, rng: np.random.Generator) -> Question | None:
    """A random question of `kind` about `scene`, or None when the scene admits none."""
    objs = scene.objects
    if kind == "caption":
        return Question(kind, "describe the image.", describe(objs))
    if kind == "count":
        shape = SHAPES[int(rng.integers(len(SHAPES)))]
        n = sum(o.shape == shape for o in objs)
        return Question(kind, f"how many {_plural(shape)} are there?", COUNT_WORDS[n])
    if kind == "color":
        shapes = _unique([o.shape for o in objs])
        if not shapes:
            return None
        shape = shapes[int(rng.integers(len(shapes)))]
        color = next(o.color for o in objs if o.shape == shape)
        return Question(kind, f"what color is the {shape}?", color)
    if kind == "shape":
        colors = _unique([o.color for o in objs])
        if not colors:
            return None
        color = colors[int(rng.integers(len(colors)))]
        shape = next(o.shape for o in objs if o.color == color)
        return Question(kind, f"what shape is the {color} object?", shape)
    if kind == "position":
        return _position(objs, rng)
    raise ValueError(f"kind {kind!r} is not one of {KINDS}")


def _position(objs: tuple[scenes.Obj, ...], rng: np.random.Generator) -> Question | None:
    if len(objs) != 2 or objs[0].shape == objs[1].shape or _relation(*objs) is None:
        return None
    a, b = objs if rng.random() < 0.5 else objs[::-1]
    truth = _relation(a, b)
    rel = truth if rng.random() < 0.5 else [r for r in RELATIONS if r != truth][
        int(rng.integers(len(RELATIONS) - 1))]
    text = f"is the {a.shape} {RELATION_WORDS[rel]} the {b.shape}?"
    return Question("position", text, "yes" if rel == truth else "no")


def words() -> list[str]:
    """Every word a question or an answer can hold that captions lack (sorted)."""
    texts = ["describe the image.", "what color is the object?", "what shape is the object?",
             "how many are there?", "is the to the left of the?", "yes no", " ".join(COUNT_WORDS)]
    found = {w for t in texts for w in re.findall(r"\w+|[^\w\s]+", t)}
    return sorted(found - set(scenes.vocabulary_words()))


def normalise(text: str) -> str:
    """Lower case, single spaces, no final period or question mark (the scoring form)."""
    return " ".join(re.findall(r"\w+|[^\w\s.?]+", text.lower()))


def caption_matches(answer: str, objects: tuple[scenes.Obj, ...]) -> bool:
    """True when a caption names the objects one to one (shape, colour where named) and any
    relation it states holds on their centres (the evaluator's laxer margin)."""
    try:
        spec = scenes.spec_of_caption(normalise(answer))
    except ValueError:
        return False
    if len(spec.objects) != len(objects):
        return False
    for perm in itertools.permutations(range(len(objects))):
        ordered = [objects[i] for i in perm]
        named = all(s == o.shape and c in (None, o.color)
                    for (s, c), o in zip(spec.objects, ordered, strict=True))
        if named and (spec.relation is None or scenes.relation_holds(
                spec.relation, (ordered[0].cx, ordered[0].cy), (ordered[1].cx, ordered[1].cy),
                RELATION_EVAL_PX)):
            return True
    return False


def is_correct(question: Question, answer: str, objects: tuple[scenes.Obj, ...]) -> bool:
    """Whether `answer` answers `question` about a scene with these objects."""
    if question.kind == "caption":
        return caption_matches(answer, objects)
    return normalise(answer) == normalise(question.answer)


def set_questions(kind: str, n: int, pool: int = 2000) -> list[tuple[int, scenes.Scene, Question]]:
    """The first `n` test scenes admitting a question of `kind`, one question each (drawn with
    seed TEST_IMAGE_SEED + scene index): (scene index, scene, question). Scene i is spec i of
    the quality test set laid out with seed TEST_IMAGE_SEED + i."""
    specs = scenes.quality_test_specs(pool)
    out = []
    for i, spec in enumerate(specs):
        objs = scenes.layout_scene(spec, np.random.default_rng(scenes.TEST_IMAGE_SEED + i))
        scene = scenes.Scene(spec, scenes.caption_for(spec), objs)
        q = ask(scene, kind, np.random.default_rng(scenes.TEST_IMAGE_SEED + i))
        if q is not None:
            out.append((i, scene, q))
        if len(out) == n:
            return out
    raise ValueError(f"only {len(out)} of the first {pool} test scenes admit a {kind} question")
