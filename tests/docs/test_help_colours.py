"""The sampler's help page names the step map's colours as the drawing code draws them (issue
55: it said "grey = still masked" over near-black cells). The colours come from
web/ladr_preview_draw.js's COLORS, the names from their RGB values, the roles from the help
page's step-map bullet; and the preview's masked tokens are the grey the help names
(ladr_core.dimoo.MASK_GREY)."""

from __future__ import annotations

import colorsys
import re

from support import ROOT

from ladr_core.dimoo.model.vq import MASK_GREY

DRAW = (ROOT / "web" / "ladr_preview_draw.js").read_text()
HELP = (ROOT / "web" / "docs" / "LADR_DiMOOSampler2" / "en.md").read_text()
# the help's words for each role -> the COLORS key the drawing code paints that role with
ROLES = {"decoded": "decoded", "still masked": "masked", "rescued by": "rescued",
         "every token the rescue decoded": "rescuedRun"}


def colours() -> dict[str, str]:
    """COLORS of the drawing code: key -> #rrggbb (the single-valued entries)."""
    block = re.search(r"export const COLORS = \{(.*?)\n\};", DRAW, re.S).group(1)
    return dict(re.findall(r"^\s*(\w+): \"(#[0-9a-fA-F]{6})\"", block, re.M))


def name_of(hex_colour: str) -> str:
    """What a user calls a colour: near-black / grey / white by lightness when it has little
    saturation, else its hue (light / dark by lightness)."""
    r, g, b = (int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5))
    hue, light, sat = colorsys.rgb_to_hls(r, g, b)
    if light < 0.2:
        return "near-black"
    if sat < 0.15:
        return "white" if light > 0.9 else "grey"
    base = next(n for limit, n in ((1 / 12, "red"), (1 / 6, "orange"), (0.2, "yellow"),
                                   (0.45, "green"), (0.75, "blue"), (0.92, "purple"),
                                   (1.01, "red")) if hue < limit)
    base = "yellow" if base == "orange" and light > 0.45 and g > 0.7 else base
    return f"light {base}" if light > 0.65 else base


def step_map_bullet() -> str:
    text = HELP.split("**The step map**", 1)[1]
    return " ".join(text.split("\n- ", 1)[0].split())


def test_the_step_map_help_names_the_colours_the_code_draws() -> None:
    palette, bullet = colours(), step_map_bullet()
    assert set(ROLES.values()) <= set(palette), palette
    for words, key in ROLES.items():
        said = re.search(rf"(light \w+|dark \w+|[\w-]+) = {re.escape(words)}", bullet)
        assert said, f"the help does not say which colour is {words!r}: {bullet}"
        assert said.group(1) == name_of(palette[key]), (words, said.group(1), palette[key])


def test_the_preview_help_names_the_masked_grey() -> None:
    assert "tokens still masked: flat grey" in HELP
    level = round(MASK_GREY * 255)
    assert name_of(f"#{level:02x}{level:02x}{level:02x}") == "grey"


def test_colour_names_tell_the_palette_apart() -> None:
    """The naming itself, on the colours it must not confuse."""
    assert [name_of(c) for c in ("#2a2a30", "#808080", "#4a6fa5", "#8fb4e6", "#ffc400")] == [
        "near-black", "grey", "blue", "light blue", "yellow"]
