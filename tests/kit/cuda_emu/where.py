"""Where an event happened: the innermost line of the repository's own code on the Python stack
(skipping this package and torch), and whether that stack is inside one of the loops the device
runs without the host waiting (LOOPS).

Those loops are ``sample()``'s step loop, the answer loop of understanding
(``decode_answers``), and the VQ encode and decode loops (``encode_images``, ``decode_codes``),
each the one ``while`` / ``for`` statement of its function (found in its source, so it follows
the code). The documented host reads inside them are listed in DOCUMENTED: the sampler's
``SampleRun.sync_counts``, the answer loop's ``_advance`` (once per block for the official order's
stop, once per pass for rules whose steps depend on the tokens) and the node's ``step_update``;
the VQ loops have none.
"""

from __future__ import annotations

import ast
import importlib
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


#: the loops the device must run without the host waiting: (module, function, loop statement,
#: what a message calls it). Each function holds exactly one such statement, found in its source.
LOOPS = (("ladr_core.sampling", "sample", ast.While, "sample()'s step loop"),
         ("ladr_core.dimoo.tasks.answering", "decode_answers", ast.While,
          "decode_answers()'s answer loop"),
         ("ladr_core.dimoo.model.vq", "encode_images", ast.For, "encode_images()'s VQ encode loop"),
         ("ladr_core.dimoo.model.vq", "decode_codes", ast.For, "decode_codes()'s VQ decode loop"))
#: the documented host reads inside those loops, (module, qualified name): the sampler's one per
#: step, the answer loop's per block (per step for rules that read the tokens), the node's
#: preview copy per step
DOCUMENTED = (("ladr_core.sampling", "SampleRun.sync_counts"),
              ("ladr_core.dimoo.tasks.answering", "_advance"),
              ("nodes.events", "step_update"))


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
def _loops() -> tuple[tuple[CodeType, int, int, str], ...]:
    """(code, first line, last line, name) of each loop of LOOPS."""
    out = []
    for module, name, kind, label in LOOPS:
        func = getattr(importlib.import_module(module), name)
        source = textwrap.dedent(inspect.getsource(func))
        first = inspect.getsourcelines(func)[1]
        found = [n for n in ast.walk(ast.parse(source)) if isinstance(n, kind)]
        if len(found) != 1:
            raise RuntimeError(f"{module}.{name} has no single {kind.__name__.lower()} loop: the "
                               "emulation's loop rule must follow the code")
        out.append((func.__code__, first + found[0].lineno - 1, first + found[0].end_lineno - 1,
                    label))
    return tuple(out)


@cache
def _documented() -> frozenset[CodeType]:
    """The code objects of DOCUMENTED (the node's only where the nodes can be imported)."""
    codes = set()
    for module, qualname in DOCUMENTED:
        try:
            obj: object = importlib.import_module(module)
        except ImportError:
            continue
        for part in qualname.split("."):
            obj = getattr(obj, part)
        codes.add(obj.__code__)  # type: ignore[attr-defined]
    return frozenset(codes)


def current_loop(frame: FrameType | None = None) -> str | None:
    """The name of the innermost loop of LOOPS the stack is inside, or None."""
    frame = frame or sys._getframe(1)
    loops = {code: (start, end, label) for code, start, end, label in _loops()}
    while frame is not None:
        hit = loops.get(frame.f_code)
        if hit is not None and hit[0] <= frame.f_lineno <= hit[1]:
            return hit[2]
        frame = frame.f_back
    return None


def in_step_loop(frame: FrameType | None = None) -> tuple[bool, bool]:
    """(inside one of the LOOPS, inside one of its DOCUMENTED reads)."""
    loops = {code: (start, end) for code, start, end, _ in _loops()}
    allowed = _documented()
    frame = frame or sys._getframe(1)
    in_documented = False
    while frame is not None:
        if frame.f_code in allowed:
            in_documented = True
        hit = loops.get(frame.f_code)
        if hit is not None and hit[0] <= frame.f_lineno <= hit[1]:
            return True, in_documented
        frame = frame.f_back
    return False, False
