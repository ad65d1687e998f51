"""The sampler's rule widgets: the parameters of the training-free strategies that have no
policy node of their own (docs/SAMPLING.md has a section on each).

`RULES`: every registered strategy except baseline, ladr and prophet (from
`ladr_core.strategy_names()`: threshold, threshold-frontier, entropy, halton, halton-ladr,
ladr-global). Each reads only the widgets that are fields of its strategy (`applies`); the
web extension (web/ladr_sampler.js) greys out the others for the chosen strategy:

  tau    threshold, threshold-frontier: the top-1 probability a token needs, (0, 1];
         halton-ladr, ladr-global: LADR's margin threshold in every phase of their policy;
  gamma  entropy: the summed entropy (nats, >= 0) one step may commit;
  token  threshold, threshold-frontier, entropy: what a committed position receives.

`AUTO` (-1) in tau or gamma keeps the value the strategy was tuned at on nano's validation
prompts. A rule runs at the T it was tuned at (like an LADR preset: the sampler's `steps` is
then not used, and the stats line says so). A bad value is refused by the strategy's own check,
naming the input.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from ladr_core import RESCUE_TOKENS, Strategy, resolve_strategy, strategy_names

from . import host

io, _ = host.v3()

OWN_SETTINGS = ("baseline", "ladr", "prophet")
"""Strategies set elsewhere: the sampler's steps, LADR Policy, Prophet Policy."""
RULES = [n for n in strategy_names() if n not in OWN_SETTINGS]
AUTO = -1.0
WIDGETS = ("tau", "gamma", "token")


def applies(name: str) -> list[str]:
    """The rule widgets strategy `name` reads: its own fields among WIDGETS, and tau where it
    has an LADR policy (its threshold in every phase); none for OWN_SETTINGS."""
    if name not in RULES:
        return []
    own = {f.name for f in fields(resolve_strategy(name))}
    if "policy" in own:
        own.add("tau")
    return [w for w in WIDGETS if w in own]


def applies_table() -> dict[str, list[str]]:
    """For the web extension: each strategy of the sampler -> the rule widgets it reads."""
    return {name: applies(name) for name in strategy_names()}


@dataclass(frozen=True)
class RuleFields:
    """The sampler's rule widgets, typed once (defaults: every rule's tuned setting)."""

    tau: float = AUTO
    gamma: float = AUTO
    token: str = "sample"

    def strategy(self, name: str, node: str = "DiMOO Sampler") -> Strategy:
        """Strategy `name` with the widgets it reads; a value the strategy refuses is one
        ValueError "<node>: <widget> ...", with the strategy's own range."""
        out = resolve_strategy(name)
        read = applies(name)
        for widget in read:
            value = getattr(self, widget)
            if widget != "token" and float(value) == AUTO:
                continue
            try:
                out = _with(out, widget, value)
            except (TypeError, ValueError) as exc:
                fix = "" if widget == "token" else f" (or {widget} = -1: the tuned value)"
                raise ValueError(f"{node}: {widget} for strategy {name!r}: {exc}{fix}") from None
        return out


def _with(strategy: Strategy, widget: str, value: object) -> Strategy:
    """`strategy` with one rule widget applied (tau of an LADR policy: in every phase)."""
    if widget == "tau" and hasattr(strategy, "policy"):
        return replace(strategy, policy=replace(strategy.policy, tau=(float(value),) * 3))
    return replace(strategy, **{widget: value if widget == "token" else float(value)})


def _tooltip(widget: str, text: str) -> str:
    users = ", ".join(r for r in RULES if widget in applies(r))
    return f"{text} Read by strategy {users} (greyed out otherwise)."


def rule_inputs() -> list:
    """The rule widgets, optional (appended to the sampler: saved workflows get AUTO)."""
    return [
        io.Float.Input("tau", default=AUTO, min=AUTO, max=1.0, step=0.01, optional=True,
                       tooltip=_tooltip("tau", "Threshold. threshold rules: the top-1 "
                                        "probability a token needs, in (0, 1] (lower = fewer "
                                        "forwards). LADR rules: the rescue's margin threshold "
                                        "in every phase, in [0, 1]. -1 = the tuned value.")),
        io.Float.Input("gamma", default=AUTO, min=AUTO, max=100.0, step=0.05, optional=True,
                       tooltip=_tooltip("gamma", "Entropy bound in nats, >= 0: larger commits "
                                        "more tokens per step (fewer forwards). -1 = the tuned "
                                        "value.")),
        io.Combo.Input("token", options=list(RESCUE_TOKENS), default="sample", optional=True,
                       tooltip=_tooltip("token", "What a committed token receives: sample "
                                        "(the temperature sample, as the official sampler) or "
                                        "argmax (the most probable token).")),
    ]
