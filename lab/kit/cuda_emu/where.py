"""Where an event happened: the innermost line of the repository's own code on the Python stack
(skipping this package and torch), and whether that stack is inside ``sample()``'s step loop.

The step loop is the ``while`` statement of ``ladr_core.sampling.sample`` (found in its source, so
it follows the code); the loop's documented host read is the one inside ``_Run.sync_counts``.
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
from functools import cache
from pathlib import Path
from types import CodeType, FrameType

REPO_ROOT = Path(__file__).resolve().parents[3]
_OWN = Path(__file__).resolve().parent


def _ours(filename: str) -> bool:
    path = Path(filename)
    return path.is_relative_to(REPO_ROOT) and not path.is_relative_to(_OWN) \
        and ".venv" not in path.parts


def site(frame: FrameType | None = None) -> str:
    """``path:line (function)`` of the innermost repository frame, relative to the repository
    (or the innermost frame of all when no repository code is on the stack)."""
    frame = frame or sys._getframe(1)
    first = None
    while frame is not None:
        name = frame.f_code.co_filename
        if first is None and not name.startswith(str(_OWN)):
            first = frame
        if _ours(name):
            rel = Path(name).resolve().relative_to(REPO_ROOT)
            return f"{rel}:{frame.f_lineno} ({frame.f_code.co_name})"
        frame = frame.f_back
    if first is None:
        return "<unknown>"
    return f"{first.f_code.co_filename}:{first.f_lineno} ({first.f_code.co_name})"


def trail(depth: int = 3) -> str:
    """``site()`` and the repository frames that called it, innermost first, joined by
    `` <- `` (at most ``depth``)."""
    frame, out = sys._getframe(1), []
    while frame is not None and len(out) < depth:
        if _ours(frame.f_code.co_filename):
            rel = Path(frame.f_code.co_filename).resolve().relative_to(REPO_ROOT)
            out.append(f"{rel}:{frame.f_lineno} ({frame.f_code.co_name})")
        frame = frame.f_back
    return " <- ".join(out) or site()


@cache
def _loop() -> tuple[CodeType, int, int, CodeType]:
    from ladr_core import sampling

    source = textwrap.dedent(inspect.getsource(sampling.sample))
    first = inspect.getsourcelines(sampling.sample)[1]
    loops = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.While)]
    if len(loops) != 1:
        raise RuntimeError("ladr_core.sampling.sample has no single while loop: the emulation's "
                           "step-loop rule must follow the code")
    start = first + loops[0].lineno - 1
    end = first + loops[0].end_lineno - 1
    return sampling.sample.__code__, start, end, sampling._Run.sync_counts.__code__


@cache
def _node_preview() -> CodeType | None:
    """The node's one documented read per step: ``nodes.events.step_update`` copies the step's
    preview bytes, masks and counts to the host in one transfer for the widget and ComfyUI's
    progress preview (None where the nodes cannot be imported)."""
    try:
        from nodes import events
    except ImportError:
        return None
    return events.step_update.__code__


def in_step_loop(frame: FrameType | None = None) -> tuple[bool, bool]:
    """(inside sample()'s step loop, inside one of its documented reads: the sampler's
    ``_Run.sync_counts`` or the node's ``step_update``)."""
    code, start, end, documented = _loop()
    allowed = {documented, _node_preview()}
    frame = frame or sys._getframe(1)
    in_documented = False
    while frame is not None:
        if frame.f_code in allowed:
            in_documented = True
        if frame.f_code is code:
            return start <= frame.f_lineno <= end, in_documented
        frame = frame.f_back
    return False, False
