"""Weight formats as objects: one ``WeightFormat`` per module of this package, decorated with
``@register_format`` and found with pkgutil at the first lookup, as the strategies are
(ladr_core/registry.py). A format says which files it recognises, how it loads them, which
conversions the loader offers (``load_choices``: Load DiMOO Model's ``weight_dtype``), which
``--weight-dtype`` names ``python -m ladr_core.dimoo.save`` writes (``save_choices``), its
weights' memory (``weight_bytes``, what the doctor and the loader's refusal report; a test
holds it to a load's) and which ComfyUI layer classes run it (``operations``); the loader, the
save command and the calibration ask this registry and never name a format.

Built in: ``official`` (the folder as stored, the fallback reader), ``fp8`` (the pack's fp8),
``comfy`` (ComfyUI's quantized folders), ``gguf`` (one ``.gguf`` file). Adding a format is one
module here and its tests. This one (tests/dimoo/test_weight_formats.py runs it) offers the
pack's fp8 with one scale per matrix while loading::

    from dataclasses import replace
    from typing import ClassVar

    from ladr_core.dimoo.weights.formats import register_format
    from ladr_core.dimoo.weights.formats.pack_fp8 import PackFP8


    @register_format
    class PerTensorFP8(PackFP8):
        # The pack's fp8 with one scale per matrix, converted while loading.
        name: ClassVar[str] = "fp8-per-tensor"
        rank: ClassVar[int] = 90
        load_choices: ClassVar[tuple[str, ...]] = ("fp8_e4m3fn_tensor",)
        save_choices: ClassVar[tuple[str, ...]] = ()

        def load_transformer(self, folder, config, request):
            asked = replace(request, weight_dtype="fp8_e4m3fn", fp8_scale="tensor")
            return super().load_transformer(folder, config, asked)

        def check_device(self, request):
            super().check_device(replace(request, weight_dtype="fp8_e4m3fn"))

        def operations(self, weight_dtype):
            return "fp8"

        def describe(self):
            return "fp8_e4m3fn_tensor: as fp8_e4m3fn, with one scale per matrix."
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch

from ...model.config import LLaDAConfig
from ...model.transformer import LLaDAModel

__all__ = ["DEFAULT", "LoadRequest", "SaveOptions", "WeightFormat", "check_load_choice",
           "file_suffixes", "load_choices", "load_format", "parameter_shapes",
           "register_format", "save_choices", "save_format", "stored_format",
           "unregister_format", "weight_formats"]

DEFAULT = "default"
"""The loader's ``weight_dtype`` that loads a checkpoint as its files store it."""
_REGISTRY: dict[str, WeightFormat] = {}


@dataclass(frozen=True)
class LoadRequest:
    """What the caller of ``load_checkpoint`` asked for (its arguments; the transformer's
    weights go to ``weights_at``)."""

    device: torch.device
    dtype: torch.dtype
    weights_at: torch.device
    weight_dtype: str | None = None
    fp8_scale: str = "channel"
    operations: Any = None


@dataclass(frozen=True)
class SaveOptions:
    """How ``save`` writes; ``input_amax`` (None: no input scales) measures the ComfyUI fp8
    layers' input ranges, called only by a format that writes them."""

    dtype: torch.dtype = torch.bfloat16
    fp8_scale: str = "channel"
    int8_scale: str = "channel"
    device: str | torch.device = "cpu"
    input_amax: Callable[[], dict[str, float]] | None = None


class WeightFormat:
    """One weight format (module docstring). Subclasses set the class attributes and override
    what applies; an instance is registered."""

    name: ClassVar[str] = ""
    rank: ClassVar[int] = 100  # order in every list (the loader's choices: lowest first)
    suffix: ClassVar[str | None] = None  # a one-file format: its file name ending (".gguf")
    label: ClassVar[str] = "checkpoint folder"  # how messages name a checkpoint in it
    load_choices: ClassVar[tuple[str, ...]] = ()
    save_choices: ClassVar[tuple[str, ...]] = ()
    fallback: ClassVar[bool] = False  # reads any folder no other format recognises

    def recognises(self, path: Path) -> bool:
        """Whether the checkpoint at ``path`` is stored in this format (headers only)."""
        return self.suffix is not None and path.suffix.lower() == self.suffix

    def load(self, path: Path, request: LoadRequest) -> Any:
        """The ``LoadedCheckpoint`` of ``path`` (stored in this format) under ``request``."""
        raise NotImplementedError(f"weight format {self.name!r} cannot load")

    def save(self, source: str | Path, out: str | Path, choice: str,
             options: SaveOptions) -> Path:
        """Write the official folder ``source`` as ``out`` in save choice ``choice``."""
        raise NotImplementedError(f"weight format {self.name!r} cannot save")

    def weight_bytes(self, config: LLaDAConfig, choice: str, dtype: torch.dtype) -> int:
        """Bytes of the transformer's weights loaded with ``choice`` (a load or save choice of
        this format, or DEFAULT for its files as stored) and compute ``dtype``."""
        raise NotImplementedError(f"weight format {self.name!r} has no memory estimate")

    def operations(self, weight_dtype: str) -> str | None:
        """Which ComfyUI layer classes run it (nodes/host.model_operations' flag: "fp8",
        "gguf", "comfy_quant"; None = the plain ones) when loaded with ``weight_dtype``."""
        return None

    def check_device(self, request: LoadRequest) -> None:
        """Refuse a conversion to this format that the devices of ``request`` cannot hold,
        before anything is read (RuntimeError naming what is missing); nothing by default."""

    def describe(self) -> str:
        """One line for the loader's ``weight_dtype`` tooltip ("" when it offers no choice)."""
        return ""

    def make_command(self) -> str:
        """The command writing a checkpoint in this format (its last save choice), for
        messages; "" when it has none."""
        if not self.save_choices:
            return ""
        return (f"python -m ladr_core.dimoo.save SRC OUT{self.suffix or ''} --weight-dtype "
                f"{self.save_choices[-1]}")


def register_format(cls: type[WeightFormat]) -> type[WeightFormat]:
    """Class decorator: register an instance of ``cls`` under ``cls.name``. A name already
    taken by another class, or a load / save choice another format owns, is refused
    (ValueError naming both)."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise ValueError(f"{cls.__name__}: a registered weight format needs a non-empty class "
                         "attribute `name`")
    held = _REGISTRY.get(name)
    if held is not None and type(held).__qualname__ != cls.__qualname__:
        raise ValueError(f"weight format {name!r} is already registered by "
                         f"{type(held).__module__}.{type(held).__qualname__}; choose another "
                         f"name for {cls.__qualname__}")
    for other in _REGISTRY.values():
        taken = set(cls.load_choices + cls.save_choices) & set(other.load_choices +
                                                                  other.save_choices)
        if other.name != name and taken:
            raise ValueError(f"weight format {name!r}: choice {sorted(taken)[0]!r} already "
                             f"belongs to weight format {other.name!r}")
    _REGISTRY[name] = cls()
    return cls


def unregister_format(name: str) -> None:
    """Remove the format registered under ``name`` (none: nothing happens); for tests and
    plug-ins that register a format for a while."""
    _REGISTRY.pop(name, None)


@functools.cache
def _load_builtins() -> None:
    """Import every module of this package: their decorated classes register."""
    for module in pkgutil.iter_modules(__path__, f"{__name__}."):
        importlib.import_module(module.name)


def weight_formats() -> list[WeightFormat]:
    """The registered formats, by rank then name."""
    _load_builtins()
    return sorted(_REGISTRY.values(), key=lambda f: (f.rank, f.name))


def load_choices() -> list[str]:
    """The loader's ``weight_dtype`` choices: DEFAULT, then every format's load choices."""
    return [DEFAULT, *(c for f in weight_formats() for c in f.load_choices if c != DEFAULT)]


def save_choices() -> tuple[str, ...]:
    """Every ``--weight-dtype`` choice of the save command, by format."""
    return tuple(c for f in weight_formats() for c in f.save_choices)


def file_suffixes() -> tuple[str, ...]:
    """The file name endings of the one-file formats (the loader lists such files)."""
    return tuple(f.suffix for f in weight_formats() if f.suffix)


def check_load_choice(weight_dtype: str | None) -> str | None:
    """None / DEFAULT -> None; a load choice -> itself; else ValueError listing the choices."""
    if weight_dtype is None or weight_dtype == DEFAULT:
        return None
    if not isinstance(weight_dtype, str) or weight_dtype not in load_choices():
        raise ValueError(f"weight_dtype {weight_dtype!r} is not supported; use one of "
                         f"{load_choices()} (or None = 'default')")
    return weight_dtype


def load_format(weight_dtype: str | None) -> WeightFormat | None:
    """The format whose load choice ``weight_dtype`` is (None for DEFAULT / None)."""
    choice = check_load_choice(weight_dtype)
    return None if choice is None else \
        next(f for f in weight_formats() if choice in f.load_choices)


def save_format(choice: str) -> WeightFormat:
    """The format that writes save choice ``choice``; ValueError listing the choices."""
    for fmt in weight_formats():
        if choice in fmt.save_choices:
            return fmt
    raise ValueError(f"weight dtype {choice!r} is not one of {list(save_choices())}")


def stored_format(path: Path) -> WeightFormat:
    """The format the checkpoint at ``path`` is stored in: the first (by rank) that recognises
    it, else the folder reader (``fallback``), whose load reports what is wrong."""
    found = weight_formats()
    for fmt in found:
        if not fmt.fallback and fmt.recognises(path):
            return fmt
    return next(f for f in found if f.fallback)


def parameter_shapes(config: LLaDAConfig) -> dict[str, torch.Size]:
    """The transformer's parameter names and shapes under ``config`` (a meta model)."""
    with torch.device("meta"):
        return {k: v.shape for k, v in LLaDAModel(config, init_std=None).state_dict().items()}
