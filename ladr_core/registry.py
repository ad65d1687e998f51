"""The one way a strategy name, an LADR preset name or a strategy object becomes a Strategy.

A strategy class joins with the `register_strategy` decorator and is then selectable by its
`name` everywhere, with no other edit:

    @register_strategy
    @dataclass(frozen=True)
    class Mine(Strategy):
        name: ClassVar[str] = "mine"
        ...

    sample(denoise, shape, strategy="mine")

The built-in strategies register the same way, every module of ladr_core/strategies/ imported
with pkgutil at the first lookup (no list; importing this module imports none). An unknown name
is a ValueError listing the known names. Called once per run by the outermost entry that
received a name (sample(), generate / paint / edit, the DiMOO Sampling Rule node).
"""

from __future__ import annotations

import functools
import importlib
import pkgutil

from .step import Strategy

_REGISTRY: dict[str, type[Strategy]] = {}

DEFAULT_STRATEGY = "ladr-global"
"""The rule run when none is named (sample, generate / paint / edit, the nodes): the one rule
never shown worse than the official sampler at the same forwards on either built-in model, at
any `steps` of README's quality-per-forward table. The paper's policy (`ladr`) is tuned for the
8B model and lost on both."""


def register_strategy(cls: type[Strategy]) -> type[Strategy]:
    """Class decorator: make `cls` selectable by `cls.name` (its defaults: `cls()`); a second
    class under a taken name is refused (ValueError naming both)."""
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


def unregister_strategy(name: str) -> None:
    """Remove the class registered under `name` (none: nothing happens); for tests and
    plug-ins that register a class for a while."""
    _REGISTRY.pop(name, None)


@functools.cache
def _load_builtins() -> None:
    """Import every module of ladr_core.strategies: their decorated classes register."""
    from . import strategies

    for module in pkgutil.iter_modules(strategies.__path__, f"{strategies.__name__}."):
        importlib.import_module(module.name)


def strategy_names() -> tuple[str, ...]:
    """Registered strategy names, sorted (registration order depends on import order)."""
    _load_builtins()
    return tuple(sorted(_REGISTRY))


def preset_names() -> tuple[str, ...]:
    """LADR preset names (ladr_core.strategies.policy.PRESETS), also accepted by
    `resolve_strategy`."""
    from .strategies.policy import PRESETS

    return tuple(PRESETS)


def strategy_class(name: str, where: str = "strategy") -> type[Strategy]:
    """The class registered under `name`; otherwise a ValueError naming `where` (the input that
    held the name) and listing the registered names."""
    _load_builtins()
    if isinstance(name, str) and name in _REGISTRY:
        return _REGISTRY[name]
    raise ValueError(f"{where} must be a registered strategy name {list(strategy_names())}; "
                     f"got {name!r}")


def resolve_strategy(spec: str | Strategy) -> Strategy:
    """A Strategy from a strategy object (as is), a registered strategy name (its defaults:
    "ladr" is the paper's policy) or an LADR preset name (`LADR.preset(name)`); else a
    ValueError listing the names."""
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


__all__ = ["DEFAULT_STRATEGY", "preset_names", "register_strategy", "resolve_strategy", "strategy_class",
           "strategy_names", "unregister_strategy"]
