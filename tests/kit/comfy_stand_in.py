"""A strict stand-in for ComfyUI's V3 API (`comfy_api.v0_0_2`) for unit tests without ComfyUI.

The pack's nodes import `comfy_api.v0_0_2` (nodes/host.py). Where ComfyUI is not importable,
tests/conftest.py installs this module under that name so the node classes can be declared and
their classmethods run. It implements nothing of ComfyUI (no validation, no execution, no UI):
it keeps what a node declares, and it REFUSES what the real API would refuse at declaration:

* an unknown name (`io.Flot`, `io.Int.Inptu`) is an AttributeError: no catch-all attributes;
* an unknown keyword (`io.Int.Input("x", defualt=1)`) is a TypeError, as a Python signature
  would raise.

The accepted names are ComfyUI 0.33's: `tests/host/test_comfy_stand_in.py` compares every kind,
keyword list and socket type here with the real `comfy_api` inside the real host, so the
stand-in cannot drift from the API it stands in for. Input / output / schema objects expose
their keywords as attributes, like the real objects (`spec.tooltip`, `spec.io_type`).
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

_CUSTOM_IN = ("id", "display_name", "optional", "tooltip", "lazy", "extra_dict", "raw_link",
              "advanced")
_OUTPUT = ("id", "display_name", "tooltip", "is_output_list")

#: kind -> (socket type, Input parameters, Output parameters), in the real signatures' order
#: (positional arguments bind in this order): ComfyUI 0.33's comfy_api.v0_0_2
KINDS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "Int": ("INT", ("id", "display_name", "optional", "tooltip", "lazy", "default", "min", "max",
                    "step", "control_after_generate", "display_mode", "socketless",
                    "force_input", "extra_dict", "raw_link", "advanced"), _OUTPUT),
    "Float": ("FLOAT", ("id", "display_name", "optional", "tooltip", "lazy", "default", "min",
                        "max", "step", "round", "display_mode", "gradient_stops", "socketless",
                        "force_input", "extra_dict", "raw_link", "advanced"), _OUTPUT),
    "String": ("STRING", ("id", "display_name", "optional", "tooltip", "lazy", "multiline",
                          "placeholder", "default", "dynamic_prompts", "socketless",
                          "force_input", "extra_dict", "raw_link", "advanced"), _OUTPUT),
    "Boolean": ("BOOLEAN", ("id", "display_name", "optional", "tooltip", "lazy", "default",
                            "label_on", "label_off", "socketless", "force_input", "extra_dict",
                            "raw_link", "advanced"), _OUTPUT),
    "Combo": ("COMBO", ("id", "options", "display_name", "optional", "tooltip", "lazy",
                        "default", "control_after_generate", "upload", "image_folder", "remote",
                        "socketless", "extra_dict", "raw_link", "advanced"),
              ("id", "display_name", "options", "tooltip", "is_output_list")),
    "Image": ("IMAGE", _CUSTOM_IN, _OUTPUT),
    "Mask": ("MASK", _CUSTOM_IN, _OUTPUT),
}
CUSTOM = (_CUSTOM_IN, _OUTPUT)
SCHEMA = ("node_id", "display_name", "category", "inputs", "outputs", "hidden", "description",
          "search_aliases", "is_input_list", "is_output_node", "is_deprecated",
          "is_experimental", "is_dev_only", "is_api_node", "price_badge", "not_idempotent",
          "enable_expand", "accept_all_inputs", "essentials_category", "has_intermediate_output")
NODE_OUTPUT = ("args", "ui", "expand", "block_execution")
HIDDEN = {"unique_id": "UNIQUE_ID", "prompt": "PROMPT", "extra_pnginfo": "EXTRA_PNGINFO",
          "dynprompt": "DYNPROMPT"}


class Declared:
    """What a declaration passed, readable as attributes; a keyword not passed reads None
    (as the real objects default it), a name that is no keyword of the API is an error."""

    _allowed: tuple[str, ...] = ()

    def __init__(self, owner: str, allowed: tuple[str, ...], **kwargs: Any) -> None:
        unknown = sorted(set(kwargs) - set(allowed))
        if unknown:
            raise TypeError(f"{owner}() got an unexpected keyword argument {unknown[0]!r}")
        self._allowed = allowed
        self._values = kwargs

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in self._allowed:
            raise AttributeError(name)
        return self._values.get(name)


class _Spec(Declared):
    def __init__(self, owner: str, io_type: str, allowed: tuple[str, ...], *args: Any,
                 **kwargs: Any) -> None:
        if len(args) > len(allowed):
            raise TypeError(f"{owner}() takes at most {len(allowed)} positional arguments")
        for name, value in zip(allowed, args, strict=False):
            if name in kwargs:
                raise TypeError(f"{owner}() got multiple values for argument {name!r}")
            kwargs[name] = value
        super().__init__(owner, allowed, **kwargs)
        self.io_type = io_type


def _kind(name: str, io_type: str, inputs: tuple[str, ...], outputs: tuple[str, ...]) -> type:
    def make_input(*args: Any, **kwargs: Any) -> _Spec:
        return _Spec(f"{name}.Input", io_type, inputs, *args, **kwargs)

    def make_output(*args: Any, **kwargs: Any) -> _Spec:
        return _Spec(f"{name}.Output", io_type, outputs, *args, **kwargs)

    return type(name, (), {"io_type": io_type, "Input": staticmethod(make_input),
                           "Output": staticmethod(make_output)})


class Schema(Declared):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("Schema", SCHEMA, **kwargs)


class NodeOutput:
    def __init__(self, *args: Any, ui: Any = None, expand: Any = None,
                 block_execution: Any = None) -> None:
        self.args, self.ui, self.expand, self.block_execution = args, ui, expand, block_execution


class ComfyNode:
    """Base of V3 nodes: classmethods only; `hidden` is filled by ComfyUI at execution."""

    hidden: Any = None

    @classmethod
    def define_schema(cls) -> Schema:
        raise NotImplementedError

    @classmethod
    def execute(cls, **kwargs: Any) -> NodeOutput:
        raise NotImplementedError

    @classmethod
    def validate_inputs(cls, **kwargs: Any) -> bool | str:
        return True


class ComfyExtension:
    async def on_load(self) -> None:
        return None

    async def get_node_list(self) -> list[type]:
        return []


def _io_module() -> ModuleType:
    io = ModuleType("comfy_api.v0_0_2.io")
    for name, (io_type, inputs, outputs) in KINDS.items():
        setattr(io, name, _kind(name, io_type, inputs, outputs))
    io.Custom = lambda io_type: _kind(f"Custom({io_type})", io_type, *CUSTOM)  # type: ignore[attr-defined]
    io.Hidden = type("Hidden", (), dict(HIDDEN))  # type: ignore[attr-defined]
    io.Schema, io.NodeOutput, io.ComfyNode = Schema, NodeOutput, ComfyNode  # type: ignore[attr-defined]
    return io


def install() -> None:
    """Register the stand-in as `comfy_api.v0_0_2` (only call where ComfyUI is absent)."""
    package = ModuleType("comfy_api")
    package.__path__ = []  # type: ignore[attr-defined]
    version = ModuleType("comfy_api.v0_0_2")
    version.io = _io_module()  # type: ignore[attr-defined]
    version.ComfyExtension = ComfyExtension  # type: ignore[attr-defined]
    package.v0_0_2 = version  # type: ignore[attr-defined]
    sys.modules["comfy_api"] = package
    sys.modules["comfy_api.v0_0_2"] = version
