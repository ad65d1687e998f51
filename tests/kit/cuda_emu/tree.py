"""Flatten and map the arguments of an op: tuples, lists and dicts of leaves (what aten ops and
torch functions take). A few times faster than torch.utils._pytree on the emulation's hot path,
which visits every op's arguments."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def leaves(value: Any, out: list[Any] | None = None) -> list[Any]:
    out = [] if out is None else out
    if isinstance(value, (list, tuple)):
        for v in value:
            leaves(v, out)
    elif isinstance(value, dict):
        for v in value.values():
            leaves(v, out)
    else:
        out.append(value)
    return out


def tree_map(fn: Callable[[Any], Any], value: Any) -> Any:
    if isinstance(value, list):
        return [tree_map(fn, v) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(tree_map(fn, v) for v in value)
    if isinstance(value, tuple):  # a named tuple (torch.return_types) keeps its type
        return type(value)(*(tree_map(fn, v) for v in value))
    if isinstance(value, dict):
        return {k: tree_map(fn, v) for k, v in value.items()}
    return fn(value)
