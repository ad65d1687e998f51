"""The sampler's help page names the step map's colours as the step map draws them (issue 55: it
said "grey = still masked" over near-black cells). The colours are those the drawing code
(web/ladr_preview_draw.js, run in node) paints on the cells of a run's events, as the sampler
sends them (nodes/events.py): a decoded, a still-masked and a rescued token mid-run, and a token
the rescue decoded on the final frame; the names come from their RGB values, the roles from the
help page's step-map bullet; and the preview's masked tokens are the grey the help names
(ladr_core.dimoo.model.vq.MASK_GREY)."""

from __future__ import annotations

import colorsys
import re

from support import ROOT
from support.browser import step_map_cells

from ladr_core.dimoo.model.vq import MASK_GREY

HELP = (ROOT / "web" / "docs" / "LADR_DiMOOSampler2" / "en.md").read_text()
# widget_record's 3 x 4 grid: token 0 decoded, 8 still masked, 5 rescued this step; on the
# final frame, token 5 is one the rescue decoded during the run
ROLES = {"decoded": ("step", 0), "still masked": ("step", 8), "rescued by": ("step", 5),
         "every token the rescue decoded": ("final", 5)}


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
    cells, bullet = step_map_cells(), step_map_bullet()
    fills = {words: cells[frame][i] for words, (frame, i) in ROLES.items()}
    assert len(set(fills.values())) == len(fills), fills  # four roles a user tells apart
    for words, fill in fills.items():
        said = re.search(rf"(light \w+|dark \w+|[\w-]+) = {re.escape(words)}", bullet)
        assert said, f"the help does not say which colour is {words!r}: {bullet}"
        assert said.group(1) == name_of(fill), (words, said.group(1), fill)


def test_the_preview_help_names_the_masked_grey() -> None:
    assert "tokens still masked: flat grey" in HELP
    level = round(MASK_GREY * 255)
    assert name_of(f"#{level:02x}{level:02x}{level:02x}") == "grey"


def test_colour_names_tell_the_palette_apart() -> None:
    """The naming itself, on the colours it must not confuse."""
    assert [name_of(c) for c in ("#2a2a30", "#808080", "#4a6fa5", "#8fb4e6", "#ffc400")] == [
        "near-black", "grey", "blue", "light blue", "yellow"]
