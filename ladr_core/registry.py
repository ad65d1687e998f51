"""The one way a strategy name, an LADR preset name or a strategy object becomes a Strategy.

`resolve_strategy` runs once, at the public boundary (the first line of `sample` and
`DiMOOPipeline.generate`, and the sampler node). A strategy class joins the registry with the
`register_strategy` decorator and is then selectable by its `name` everywhere, with no other
edit:

    @register_strategy
    @dataclass(frozen=True)
    class Mine(Strategy):
        name: ClassVar[str] = "mine"
        ...

    sample(denoise, shape, strategy="mine")

The built-in strategies (ladr_core.baseline, ladr_core.ladr, ladr_core.prophet) register
themselves the same way; this module imports them the first time a name is looked up, so
importing it (as the generic loop does) imports no concrete strategy.
"""

from __future__ import annotations

import importlib

from .step import Strategy

_BUILTIN_MODULES = ("ladr_core.baseline", "ladr_core.ladr", "ladr_core.prophet",
                    "ladr_core.threshold", "ladr_core.entropy", "ladr_core.halton",
                    "ladr_core.halton_ladr", "ladr_core.ladr_global")
_REGISTRY: dict[str, type[Strategy]] = {}


def register_strategy(cls: type[Strategy]) -> type[Strategy]:
    """Class decorator: make `cls` selectable by `cls.name` (its defaults: `cls()`).

    A second class under a name already taken is refused (ValueError naming both)."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise ValueError(f"{cls.__name__}: a registered strategy needs a non-empty class "
                         "attribute `name` (the string that selects it)")
    held = _REGISTRY.get(name)
    if held is not None and held.__qualname__ != cls.__qualname__:
        raise ValueError(f"strategy name {name!r} is already registered by {held.__module__}."
                         f"{held.__qualname__}; choose another name for {cls.__qualname__}")
    _REGISTRY[name] = cls
    return cls


def _load_builtins() -> None:
    for module in _BUILTIN_MODULES:
        importlib.import_module(module)


def strategy_names() -> tuple[str, ...]:
    """Registered strategy names, sorted (registration order depends on import order)."""
    _load_builtins()
    return tuple(sorted(_REGISTRY))


def preset_names() -> tuple[str, ...]:
    """LADR preset names (ladr_core.policy.PRESETS), also accepted by `resolve_strategy`."""
    from .policy import PRESETS

    return tuple(PRESETS)


def resolve_strategy(spec: str | Strategy) -> Strategy:
    """A Strategy from a strategy object (returned as is), a registered strategy name (its
    defaults: "ladr" is the paper's policy) or an LADR preset name (`LADR.preset(name)`: the
    preset's policy with the T it was tuned at). Anything else: ValueError listing the names."""
    if isinstance(spec, Strategy):
        return spec
    _load_builtins()
    if isinstance(spec, str) and spec in _REGISTRY:
        return _REGISTRY[spec]()
    if isinstance(spec, str) and spec in preset_names():
        return _REGISTRY["ladr"].preset(spec)  # type: ignore[attr-defined]
    raise ValueError(f"strategy must be a Strategy object (Baseline(), LADR(policy), "
                     f"Prophet(policy), ...), a strategy name {list(strategy_names())} or an "
                     f"LADR preset name {list(preset_names())}; got {spec!r}")


__all__ = ["preset_names", "register_strategy", "resolve_strategy", "strategy_names"]
