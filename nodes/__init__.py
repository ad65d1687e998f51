"""ComfyUI V3 nodes of the pack: a thin adapter over `ladr_core` (docs/CONVENTIONS.md, "Thin V3 nodes").

A node joins the pack with no list to edit: its class carries `@register_node(menu=<position>)`
and `node_classes()` imports every module of this package on its first call (importing `nodes`
imports none). `__all__`: the names the lab uses, each imported from its module on first use.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable

from ladr_core import by_module, lazy_exports

_EXPORTS = by_module({
    ".handles": "DiMOOModel TOKENS_TYPE",
    ".loader": "BUILT_IN EMOJI NANO",
    ".sampler": "DiMOOSampler split_prompts",
    ".edit": "DiMOOEdit",
    ".policy": "LADRPolicyNode PolicyFields build_strategy",
    ".rules": "AUTO RuleFields build_rule",
    ".run": "make_callback",
    ".decode": "decode_tokens",
    ".understand": "CAPTION_QUESTION one_line",
})
_MODULES = {"host": ".host"}

__all__ = sorted([*_EXPORTS, *_MODULES, "extension_class", "node_classes", "register_node"])

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS, _MODULES)

_REGISTERED: dict[int, type] = {}
"""Menu position -> the node class registered there."""


def register_node(menu: int) -> Callable[[type], type]:
    """Class decorator: one of the pack's nodes, at menu position `menu` (multiples of 10 so far).
    A position another class holds is refused; the same class again (a reload) takes it back."""

    def add(cls: type) -> type:
        held = _REGISTERED.get(menu)
        name = f"{cls.__module__}.{cls.__qualname__}"
        if held is not None and f"{held.__module__}.{held.__qualname__}" != name:
            raise ValueError(f"{name}: menu position {menu} is already held by "
                             f"{held.__module__}.{held.__qualname__}; choose a free position")
        _REGISTERED[menu] = cls
        return cls

    return add


@functools.cache
def _import_node_modules() -> None:
    """Import every module of this package: their decorated node classes register."""
    for module in pkgutil.iter_modules(__path__, f"{__name__}."):
        importlib.import_module(module.name)


def node_classes() -> list[type]:
    """All node classes, in menu order; two under one `node_id` are refused (ComfyUI keeps one)."""
    _import_node_modules()
    classes = [_REGISTERED[menu] for menu in sorted(_REGISTERED)]
    seen: dict[str, type] = {}
    for cls in classes:
        node_id = cls.define_schema().node_id
        if node_id in seen:
            raise ValueError(f"node_id {node_id!r} is registered by both "
                             f"{seen[node_id].__qualname__} and {cls.__qualname__}; a node_id "
                             "names one node: give the new node its own")
        seen[node_id] = cls
    return classes


def extension_class() -> type:
    """The `ComfyExtension` subclass returned by the pack's `comfy_entrypoint`."""
    from . import host

    _io, base = host.v3()

    class LADRExtension(base):
        async def on_load(self) -> None:
            from .canvas import note_prompt

            host.register_model_folder()
            host.install_example_inputs()
            host.serve_help_in_every_language()
            host.add_prompt_handler(note_prompt)  # DiMOO Canvas's grid check at /prompt

        async def get_node_list(self) -> list[type]:
            return node_classes()

    return LADRExtension
