"""DiMOO Sampling Rule node -> the LADR_RULE socket: which tokens each step commits, as one
strategy object (nodes/handles.SamplingRule), the way KSamplerSelect feeds SamplerCustomAdvanced.
A strategy name becomes an object here, once per run. ladr and prophet read the `policy` socket,
the `RULES` the tau / gamma / token widgets that are fields of theirs (`applies`; web/ladr_rules.js
greys out the others); `AUTO` (-1) keeps the tuned value.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from ladr_core import DEFAULT_STRATEGY, RESCUE_TOKENS, Strategy, resolve_strategy, strategy_names

from . import host, register_node
from .handles import POLICY_TYPE, RULE_TYPE, SamplingRule
from .policy import describe
from .validate import check_numbers, check_socket

io, _ = host.v3()

OWN_SETTINGS = ("baseline", "ladr", "prophet")
"""Strategies set elsewhere: the sampler's steps, LADR Policy, Prophet Policy."""
RULES = [n for n in strategy_names() if n not in OWN_SETTINGS]
STRATEGIES = [DEFAULT_STRATEGY, *(n for n in strategy_names() if n != DEFAULT_STRATEGY)]  # default first
NODE = "DiMOO Sampling Rule"
AUTO = -1.0
WIDGETS = ("tau", "gamma", "token")


def applies(name: str) -> list[str]:
    """The rule widgets strategy `name` reads: its fields among WIDGETS, and tau where it has
    an LADR policy (its threshold in every phase)."""
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

    def strategy(self, name: str, node: str = NODE) -> Strategy:
        """Strategy `name` with the widgets it reads; a refused value is one ValueError
        "<node>: <widget> ..." with the strategy's own range."""
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


def build_rule(name: str, policy: Strategy | None, fields: RuleFields | None = None,
               node: str = NODE) -> SamplingRule:
    """The strategy widget, policy socket and rule widgets -> the rule: the connected policy when
    of the chosen kind, else the chosen strategy with the widgets it reads (and a note that a
    connected policy was not used)."""
    if name not in STRATEGIES:
        raise ValueError(f"strategy: {name!r} is not one of {STRATEGIES}")
    if fields is not None:  # NaN in a widget the strategy does not read, too
        check_numbers(node, {"tau": fields.tau, "gamma": fields.gamma})
    check_socket("policy", policy, Strategy, "LADR / Prophet strategy",
                 "Prophet Policy" if name == "prophet" else "LADR Policy")
    if policy is not None and policy.name == name:
        return SamplingRule(policy)
    chosen = (fields or RuleFields()).strategy(name, node) if name in RULES \
        else resolve_strategy(name)
    note = "" if policy is None else \
        f"; the connected {describe(policy)} was not used (strategy is {name!r})"
    return SamplingRule(chosen, note)


def strategy_input() -> object:
    """The strategy widget, with the table the web extension greys the rule widgets by."""
    return io.Combo.Input("strategy", options=STRATEGIES, default=DEFAULT_STRATEGY,
                          tooltip="ladr-global (default): LADR's rescue over every masked token. "
                          "ladr: LADR with its policy (the paper's: tuned for the 8B model). "
                          "baseline: the official cosine schedule. prophet: early-commit "
                          "comparison. threshold, entropy, halton, threshold-frontier, "
                          "halton-ladr: training-free rules, set by tau, gamma and token.",
                          extra_dict={"ladr_rules": applies_table()})


def policy_input() -> object:
    return io.Custom(POLICY_TYPE).Input("policy", optional=True,
                                        tooltip="Optional LADR Policy (strategy ladr; default: "
                                        "the paper's) or Prophet Policy (strategy prophet).")


def rule_inputs(optional: bool = True) -> list:
    """The rule widgets (optional on the legacy sampler, where they were appended)."""
    return [
        io.Float.Input("tau", default=AUTO, min=AUTO, max=1.0, step=0.01, optional=optional,
                       tooltip=_tooltip("tau", "Threshold. threshold rules: the top-1 "
                                        "probability a token needs, in (0, 1] (lower = fewer "
                                        "forwards). LADR rules: the rescue's margin threshold "
                                        "in every phase, in [0, 1]. -1 = the tuned value.")),
        io.Float.Input("gamma", default=AUTO, min=AUTO, max=100.0, step=0.05, optional=optional,
                       tooltip=_tooltip("gamma", "Entropy bound in nats, >= 0: larger commits "
                                        "more tokens per step (fewer forwards). -1 = the tuned "
                                        "value.")),
        io.Combo.Input("token", options=list(RESCUE_TOKENS), default="sample", optional=optional,
                       tooltip=_tooltip("token", "What a committed token receives: sample "
                                        "(the temperature sample, as the official sampler) or "
                                        "argmax (the most probable token).")),
    ]


@register_node(menu=30)
class SamplingRuleNode(io.ComfyNode):
    """The sampling rule as one socket: a strategy with its settings, for DiMOO Sampler."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="LADR_SamplingRule",
            display_name=NODE,
            category="LADR",
            search_aliases=["strategy", "sampler select", "ladr", "prophet", "threshold",
                            "entropy", "halton"],
            description="Which tokens each step of DiMOO Sampler commits: LADR (default), the "
            "official baseline, Prophet or a training-free rule, with its settings. Without "
            "this node the sampler runs LADR with the paper's policy.",
            inputs=[strategy_input(), *rule_inputs(optional=False), policy_input()],
            outputs=[io.Custom(RULE_TYPE).Output("rule", tooltip="-> DiMOO Sampler's rule.")],
        )

    # No validate_inputs: the schema's ranges, then the strategy's own check (RuleFields).

    @classmethod
    def execute(cls, strategy: str, tau: float, gamma: float, token: str,
                policy: Strategy | None = None) -> io.NodeOutput:
        return io.NodeOutput(build_rule(strategy, policy, RuleFields(tau, gamma, token)))
