"""The emoji the testbed draws, chosen for what a small model on a CPU can learn.

Why these 24: at 16 px (a 4 x 4 patch of VQ tokens on the 48 px canvas) a picture survives only
by its colour and silhouette, so every emoji here is one solid, recognisable blob in all three
styles: no faces with expressions, people, flags, skin tones, text or thin line art, which blur
into each other at that size, and none that is mostly white (it would vanish on the
white canvas: the ghost was dropped for that). Fifteen carry their colour in their name (five hearts, four
circles, four squares, two apples), so colour binding can be tested the way GenEval tests it
(a kind drawn in several colours: the colour decides). Nine are distinct objects with their own
shape and colour (star, banana, carrot, tangerine, droplet, fire, mushroom, tree, fish), so naming
is not all colour. Each name is the CLDR name of the emoji as OpenMoji's table writes it
(`annotation` column of data/openmoji.csv), checked when the picture bank is built.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Emoji:
    code: str          # emoji-datasource `unified` (upper-case hex, '-' joined)
    name: str          # CLDR name (caption noun)
    plural: str
    kind: str | None = None    # heart / circle / square / apple for colour-named emoji
    color: str | None = None

    @property
    def openmoji_code(self) -> str:
        """OpenMoji names its files without the emoji presentation selector."""
        return self.code.replace("-FE0F", "")


def _colored(code: str, color: str, kind: str) -> Emoji:
    name = f"{color} {kind}"
    return Emoji(code, name, name + "s", kind, color)


VOCAB: tuple[Emoji, ...] = (
    _colored("2764-FE0F", "red", "heart"),
    _colored("1F499", "blue", "heart"),
    _colored("1F49A", "green", "heart"),
    _colored("1F49B", "yellow", "heart"),
    _colored("1F49C", "purple", "heart"),
    _colored("1F534", "red", "circle"),
    _colored("1F535", "blue", "circle"),
    _colored("1F7E2", "green", "circle"),
    _colored("1F7E1", "yellow", "circle"),
    _colored("1F7E5", "red", "square"),
    _colored("1F7E6", "blue", "square"),
    _colored("1F7E9", "green", "square"),
    _colored("1F7E8", "yellow", "square"),
    _colored("1F34E", "red", "apple"),
    _colored("1F34F", "green", "apple"),
    Emoji("2B50", "star", "stars"),
    Emoji("1F34C", "banana", "bananas"),
    Emoji("1F955", "carrot", "carrots"),
    Emoji("1F34A", "tangerine", "tangerines"),
    Emoji("1F4A7", "droplet", "droplets"),
    Emoji("1F525", "fire", "fires"),
    Emoji("1F344", "mushroom", "mushrooms"),
    Emoji("1F333", "deciduous tree", "deciduous trees"),
    Emoji("1F41F", "fish", "fish"),
)
NAMES: tuple[str, ...] = tuple(e.name for e in VOCAB)
INDEX: dict[str, int] = {e.name: i for i, e in enumerate(VOCAB)}
KINDS: dict[str, tuple[int, ...]] = {
    k: tuple(i for i, e in enumerate(VOCAB) if e.kind == k)
    for k in dict.fromkeys(e.kind for e in VOCAB if e.kind)}
