"""Host-free stand-in for the subset of ComfyUI's V3 node API (`comfy_api.*.io`) that we use.

Used ONLY when ComfyUI is not importable (tests, the CLI), chosen by `nodes.host.v3()`.
It mirrors the public surface of ComfyUI 0.33's `comfy_api/latest/_io.py` for what our nodes
touch: `ComfyNode` classmethods, `Schema`, widget inputs with their range fields, custom typed
sockets, `NodeOutput`, `Hidden.unique_id` and `ComfyExtension`. The attribute names (`id`,
`io_type`, `optional`, `default`, `min`, `max`, `step`, `options`, `control_after_generate`,
`multiline`, `tooltip`) match the real classes so schema-walking tests run against either.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Boolean", "Combo", "ComfyExtension", "ComfyNode", "Custom", "Float", "Hidden", "Image",
    "Int", "NodeOutput", "Schema", "String",
]


class Hidden(str, enum.Enum):
    """Hidden inputs; ComfyUI fills `cls.hidden.<name>` at run time."""

    unique_id = "UNIQUE_ID"


class _Input:
    """One node input; `io_type` is the socket type name (INT, FLOAT, LADR_POLICY, ...)."""

    io_type = "*"

    def __init__(self, id: str, display_name: str | None = None, optional: bool = False,
                 tooltip: str | None = None, default: Any = None, **extra: Any) -> None:
        self.id = id
        self.display_name = display_name
        self.optional = optional
        self.tooltip = tooltip
        self.default = default
        self.min = extra.pop("min", None)
        self.max = extra.pop("max", None)
        self.step = extra.pop("step", None)
        self.round = extra.pop("round", None)
        self.options = extra.pop("options", None)
        self.multiline = extra.pop("multiline", False)
        self.control_after_generate = extra.pop("control_after_generate", None)
        self.extra = extra


class _Output:
    io_type = "*"

    def __init__(self, id: str | None = None, display_name: str | None = None,
                 tooltip: str | None = None, is_output_list: bool = False) -> None:
        self.id = id
        self.display_name = display_name or id
        self.tooltip = tooltip
        self.is_output_list = is_output_list


def _socket(io_type: str) -> type:
    """A ComfyType-like class with nested Input/Output bound to `io_type`."""
    input_cls = type("Input", (_Input,), {"io_type": io_type})
    output_cls = type("Output", (_Output,), {"io_type": io_type})
    return type(io_type, (), {"io_type": io_type, "Input": input_cls, "Output": output_cls})


class _Combo(_Input):
    io_type = "COMBO"

    def __init__(self, id: str, options: list[str] | None = None, **kw: Any) -> None:
        super().__init__(id, options=list(options or []), **kw)


Int = _socket("INT")
Float = _socket("FLOAT")
String = _socket("STRING")
Boolean = _socket("BOOLEAN")
Image = _socket("IMAGE")
Combo = type("Combo", (), {"io_type": "COMBO", "Input": _Combo, "Output": _socket("COMBO").Output})

_CUSTOM: dict[str, type] = {}


def Custom(io_type: str) -> type:  # noqa: N802 - mirrors comfy_api's factory name
    """A custom typed socket (same class for the same name, like ComfyUI's registry)."""
    if io_type not in _CUSTOM:
        _CUSTOM[io_type] = _socket(io_type)
    return _CUSTOM[io_type]


@dataclass
class Schema:
    """Node definition (same field names as ComfyUI's `io.Schema`)."""

    node_id: str
    display_name: str | None = None
    category: str = "sd"
    inputs: list[Any] = field(default_factory=list)
    outputs: list[Any] = field(default_factory=list)
    hidden: list[Hidden] = field(default_factory=list)
    description: str = ""
    search_aliases: list[str] = field(default_factory=list)
    is_output_node: bool = False
    not_idempotent: bool = False


class NodeOutput:
    """Outputs of one execution (`args`) plus optional UI data."""

    def __init__(self, *args: Any, ui: dict | None = None) -> None:
        self.args = args
        self.ui = ui

    @property
    def result(self) -> tuple | None:
        return self.args if self.args else None

    def __getitem__(self, index: int) -> Any:
        return self.args[index]


class _HiddenHolder:
    def __init__(self, unique_id: str | None = None) -> None:
        self.unique_id = unique_id


class ComfyNode:
    """Base node: classmethods only, no instance state (as in ComfyUI V3)."""

    hidden: _HiddenHolder | None = None

    @classmethod
    def define_schema(cls) -> Schema:
        raise NotImplementedError

    @classmethod
    def execute(cls, **kwargs: Any) -> NodeOutput:
        raise NotImplementedError

    @classmethod
    def GET_SCHEMA(cls) -> Schema:  # noqa: N802 - mirrors ComfyUI
        return cls.define_schema()


class ComfyExtension:
    """Extension object returned by `comfy_entrypoint()`."""

    async def on_load(self) -> None:
        return None

    async def get_node_list(self) -> list[type[ComfyNode]]:
        raise NotImplementedError
