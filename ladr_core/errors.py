"""InputError: one bad argument, named, with what is wrong and the fix.

The library raises it where one input is at fault (an image's size, a mask's values, a width);
``str(err)`` reads ``"<name> <problem>; <fix>"``. The ComfyUI nodes re-raise it with their own
name and, where the fix differs in a graph (a node to add, a widget to set), their own fix, so
one check serves Python and the nodes alike.
"""

from __future__ import annotations

__all__ = ["InputError"]


class InputError(ValueError):
    """``name``: the argument (or node input) that is wrong; ``problem``: what is wrong with it,
    phrased to follow the name ("is 50 px, ...", or "=50 is ..."); ``fix``: what to do instead."""

    def __init__(self, name: str, problem: str, fix: str) -> None:
        gap = "" if problem.startswith("=") else " "  # "width=50 is ..." reads as one phrase
        super().__init__(f"{name}{gap}{problem}; {fix}")
        self.name, self.problem, self.fix = name, problem, fix
