"""One validation message per mistake, on the input that is wrong (ComfyUI 0.33 rules).

ComfyUI (``execution.validate_inputs``) attaches a string returned by a node's
``validate_inputs`` to EVERY input named in its signature (all of them with ``**kwargs``), and
runs the schema's own checks (``min``/``max``, a COMBO's options) only for inputs not named
there. So a node that wants one message on the wrong widget:

1. leaves ranges and choices to the schema (``min``, ``max``, ``options``);
2. names at most ONE input in ``validate_inputs``: a check spanning two widgets there would put
   its message on both. One exception: DiMOO Canvas names width and height (nodes/canvas.py);
   web/ladr_input_errors.js keeps its message on the input it names;
3. checks what spans several inputs, or needs the loaded model, in ``execute``: a ``ValueError``
   there is one message naming the input (``input_error``), shown once by the host.

A workflow file can hold what no widget can: ``validate_inputs`` arguments default to
``ABSENT`` (ComfyUI leaves out an input the prompt lacks and reports it missing itself; a null
arrives as None), and ``check_numbers`` refuses NaN, which passes the host's ``min``/``max``
(every comparison with it is false), in float widgets a node's settings may not read.

``attached_inputs`` says which inputs a ``validate_inputs`` failure lands on (rule 2's test).
"""

from __future__ import annotations

import inspect
import math

from ladr_core import InputError

__all__ = ["ABSENT", "attached_inputs", "check_numbers", "check_socket", "input_error",
           "node_error"]

ABSENT = object()
"""A ``validate_inputs`` argument's default: the input is not in the prompt (module docstring)."""


def attached_inputs(node_cls: type) -> list[str] | None:
    """Inputs ComfyUI attaches a failed ``validate_inputs`` to; None = all of them (**kwargs)."""
    fn = node_cls.__dict__.get("validate_inputs")
    if fn is None:
        return []
    spec = inspect.getfullargspec(fn.__func__ if isinstance(fn, classmethod) else fn)
    if spec.varkw is not None:
        return None
    return [a for a in spec.args if a not in ("cls", "self")]


def input_error(node: str, name: str, problem: str, fix: str) -> ValueError:
    """``ValueError("<node>: <input> <problem>; <fix>")``: the one execute-time message format."""
    return ValueError(f"{node}: {name} {problem}; {fix}")


def check_numbers(node: str, values: dict[str, object]) -> None:
    """One ``input_error`` for the first float widget holding NaN (module docstring)."""
    for name, value in values.items():
        if isinstance(value, float) and math.isnan(value):
            raise input_error(node, name, "is NaN (not a number), which no widget holds: the "
                              "workflow file was edited or damaged", "set it to a number")


def node_error(node: str, err: InputError, names: dict[str, str] | None = None,
               fixes: dict[str, str] | None = None) -> ValueError:
    """A library InputError as the node's one message: ``"<node>: <input> <problem>; <fix>"``,
    ``names``: library argument -> node input where they differ; ``fixes``: a node's own fix."""
    name = (names or {}).get(err.name, err.name)
    fix = (fixes or {}).get(name, err.fix)
    gap = "" if err.problem.startswith("=") else " "
    return ValueError(f"{node}: {name}{gap}{err.problem}; {fix}")


def check_socket(name: str, value: object, kind: type | tuple[type, ...], what: str,
                 source: str) -> None:
    """A socket's value (None: not connected) is of this version's `kind`, or one ValueError
    naming the input (another pack version's node or workflow hands over other classes)."""
    if value is None or isinstance(value, kind):
        return
    got = f"{type(value).__module__}.{type(value).__name__}"
    raise ValueError(f"{name}: got a {got}, not this version's {what} (a workflow or node from "
                     f"another ComfyUI-LADR version?); re-create the {source} node and "
                     "reconnect it")
