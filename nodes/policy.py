"""LADR Policy and Prophet Policy nodes -> the LADR_POLICY socket, which carries a strategy object.

LADR Policy: a preset (`ladr_core.strategies.policy.PRESETS`) or, with `custom`, every field of
`LADRPolicy` by hand (web/docs/LADR_Policy/en.md; web/ladr_policy.js greys out or hides fields).
Prophet Policy: Prophet's early-commit thresholds. Invalid values fail with the core's message,
naming the field. Input names never change: the adaptive widgets were appended, optional, and
ComfyUI's DynamicCombo was not used for the preset because it renames the nested inputs
(`preset.tau_structure`), which would break every saved workflow.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

from ladr_core import (
    ADAPTIVE_REPLACES,
    CANDIDATES,
    LADR,
    METRICS,
    NO_TAU,
    PACE_RANGE,
    PHASE_NAMES,
    PRESETS,
    RESCUE_TOKENS,
    SELECTIONS,
    AdaptiveRescue,
    LADRPolicy,
    Prophet,
    ProphetPolicy,
    Strategy,
    tau_from_number,
)

from . import host, register_node
from .handles import POLICY_TYPE
from .validate import ABSENT, check_numbers

io, _ = host.v3()

# Stable option names (saved in workflows): the first four, then the other presets (sorted).
PRESET_OPTIONS = ["paper", "delayed", "off", "custom",
                  *sorted(k for k in PRESETS if k not in ("paper", "delayed", "off"))]

_D = LADRPolicy()
_A = AdaptiveRescue()
ADAPTIVE_FIELDS = ("pace", "anchor_quantile")
"""The widgets read only with adaptive rescue on."""


def replaced_fields() -> list[str]:
    """The widgets adaptive rescue does not read (ladr_core.ADAPTIVE_REPLACES, per phase)."""
    out: list[str] = []
    for name in ADAPTIVE_REPLACES:
        out += [f"{name}_{ph}" for ph in PHASE_NAMES] if name in ("tau", "alpha") else [name]
    return out


def switch_table() -> dict[str, object]:
    """For the web extension: the toggle that switches the rescue and what each state hides."""
    return {"field": "adaptive", "on": replaced_fields(), "off": list(ADAPTIVE_FIELDS)}


def policy_fields(policy: LADRPolicy) -> dict[str, object]:
    """A policy as the node's field widgets show it (tau None -> NO_TAU)."""
    out: dict[str, object] = {"exploration_end": policy.phase_bounds[0],
                              "refinement_start": policy.phase_bounds[1]}
    for i, ph in enumerate(PHASE_NAMES):
        out[f"tau_{ph}"] = NO_TAU if policy.tau[i] is None else policy.tau[i]
    for i, ph in enumerate(PHASE_NAMES):
        out[f"alpha_{ph}"] = policy.alpha[i]
    out.update(kernel_size=policy.kernel_size, metric=policy.metric,
               candidates=policy.candidates, delayed=policy.delayed,
               selection=policy.selection, rescue_token=policy.rescue_token,
               seen_only=policy.seen_only)
    rescue = policy.adaptive or _A
    out.update(adaptive=policy.adaptive is not None, pace=rescue.pace,
               anchor_quantile=rescue.anchor_quantile)
    return out


def preset_table() -> dict[str, dict[str, object]]:
    """What each preset sets, for the web extension: its field values and its summary."""
    return {name: {"fields": policy_fields(p.policy), "summary": p.summary}
            for name, p in PRESETS.items()}


@dataclass(frozen=True)
class PolicyFields:
    """LADR Policy's field widgets, typed once (those after `delayed` are optional: defaults)."""

    exploration_end: float
    refinement_start: float
    tau_exploration: float
    tau_structure: float
    tau_refinement: float
    alpha_exploration: float
    alpha_structure: float
    alpha_refinement: float
    kernel_size: int
    metric: str
    candidates: str
    delayed: bool
    selection: str = _D.selection
    rescue_token: str = _D.rescue_token
    seen_only: bool = _D.seen_only
    adaptive: bool = False
    pace: float = _A.pace
    anchor_quantile: float = _A.anchor_quantile

    def policy(self) -> LADRPolicy:
        """The LADRPolicy these fields describe (it validates itself). With `adaptive` on, the
        hidden tau, alpha and delayed take their defaults: a value typed there cannot block."""
        f = self
        rescue = None
        if bool(f.adaptive):
            rescue = AdaptiveRescue(pace=float(f.pace), anchor_quantile=float(f.anchor_quantile))
            f = replace(f, **{k: v for k, v in policy_fields(_D).items()
                              if k in replaced_fields()})
        return LADRPolicy(
            phase_bounds=(float(f.exploration_end), float(f.refinement_start)),
            tau=tuple(tau_from_number(f"tau_{p}", getattr(f, f"tau_{p}")) for p in PHASE_NAMES),
            alpha=tuple(float(getattr(f, f"alpha_{p}")) for p in PHASE_NAMES),
            kernel_size=int(f.kernel_size), metric=str(f.metric), candidates=str(f.candidates),
            delayed=bool(f.delayed), selection=str(f.selection),
            rescue_token=str(f.rescue_token), seen_only=bool(f.seen_only), adaptive=rescue)


def build_policy(preset: str, fields: PolicyFields) -> LADRPolicy:
    """Preset -> its LADRPolicy; `custom` builds one from the field widgets (validated)."""
    if preset in PRESETS:
        return PRESETS[preset].policy
    if preset != "custom":
        raise ValueError(f"preset: {preset!r} is not one of {PRESET_OPTIONS}")
    return fields.policy()


def build_strategy(preset: str, fields: PolicyFields) -> LADR:
    """The socket value: a preset's policy (`LADR.preset`), or LADR(custom policy)."""
    if preset in PRESETS:
        return LADR.preset(preset)
    return LADR(build_policy(preset, fields))


def checked(node: str, build: Callable[[], object]) -> object:
    """`build()` with the core's message prefixed by the node's name: combinations of widgets
    are checked at run time, one message naming the field (nodes/validate.py rule 3)."""
    try:
        return build()
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{node}: {exc}") from None


EXPERT_FIELDS = ("kernel_size", "metric", "candidates", "selection", "rescue_token",
                 "seen_only", "pace", "anchor_quantile")
"""The expert widgets (the paper's ablations, the adaptive rescue's tuning): V3 ``advanced=True``
inputs, listed apart in frontend 1.49.6's Parameters panel; saved workflows are unchanged."""


def _float(name: str, default: float, tip: str, lo: float = 0.0, optional: bool = False) -> object:
    return io.Float.Input(name, default=default, min=lo, max=1.0, step=0.01, tooltip=tip,
                          optional=optional, **expert(name))


def expert(name: str) -> dict[str, bool]:
    """The ``advanced`` keyword of widget ``name``: True for EXPERT_FIELDS, else not passed."""
    return {"advanced": True} if name in EXPERT_FIELDS else {}


def field_inputs() -> list:
    """One widget per LADRPolicy field (triples split per phase), defaults = the paper's."""
    d = policy_fields(_D)
    out = [
        _float("exploration_end", d["exploration_end"], "custom only. t_eff below this is the "
               "exploration phase (paper: 0.2). Must be <= refinement_start."),
        _float("refinement_start", d["refinement_start"], "custom only. t_eff at or above this "
               "is the refinement phase (paper: 0.7)."),
    ]
    for ph in PHASE_NAMES:
        out.append(_float(f"tau_{ph}", d[f"tau_{ph}"], f"custom only. Margin threshold tau in "
                          f"the {ph} phase: a frontier token is rescued only if "
                          "p(top1)-p(top2) > tau (Eq. 10). In [0, 1]; -1 = no threshold.",
                          lo=NO_TAU))
    for ph in PHASE_NAMES:
        out.append(_float(f"alpha_{ph}", d[f"alpha_{ph}"], f"custom only. Rescue ratio alpha "
                          f"in the {ph} phase: at most floor(|frontier| * alpha) tokens rescued "
                          "per step."))
    return out + _rescue_inputs()


def _rescue_inputs() -> list:
    """The widgets after the phase fields: the frontier, the selection and the adaptive
    rescue (most of them expert: EXPERT_FIELDS)."""
    return [
        io.Int.Input("kernel_size", **expert("kernel_size"),
                     default=_D.kernel_size, min=1, max=15, step=2,
                     tooltip="custom only. Side k of the k x k dilation kernel that finds the "
                     "frontier (Eq. 9); odd. Paper: 3."),
        io.Combo.Input("metric", **expert("metric"), options=list(METRICS), default=_D.metric,
                       tooltip="custom only. How frontier candidates are ranked: margin "
                       "(paper), confidence or random (ablations)."),
        io.Combo.Input("candidates", **expert("candidates"),
                       options=list(CANDIDATES), default=_D.candidates,
                       tooltip="custom only. Which masked tokens are candidates: neighbors = "
                       "the frontier (paper); non_neighbors / random are ablations."),
        io.Boolean.Input("delayed", default=_D.delayed,
                         tooltip="custom only. Delayed rescue: no rescue in the exploration "
                         "phase (paper Table 5; better text rendering, ~2.5x instead of ~4x)."),
        # Added after the paper's fields, optional: workflows saved without them get the defaults.
        io.Combo.Input("selection", **expert("selection"),
                       options=list(SELECTIONS), default=_D.selection, optional=True,
                       tooltip="custom only. Standard selection: top1 = most probable tokens "
                       "first (paper); gumbel = the DiMOO baseline's noisy rule, which places "
                       "objects before filling the background."),
        io.Combo.Input("rescue_token", **expert("rescue_token"),
                       options=list(RESCUE_TOKENS), default=_D.rescue_token,
                       optional=True,
                       tooltip="custom only. Token a rescued position receives: sample (paper) "
                       "or argmax (the most probable token, the one the margin certifies)."),
        io.Boolean.Input("seen_only", **expert("seen_only"), default=_D.seen_only, optional=True,
                         tooltip="custom only. Rescue only neighbours of tokens decoded before "
                         "this step, never next to tokens picked in the same step."),
        # Added after seen_only, optional (saved workflows keep their widget order).
        io.Boolean.Input("adaptive", default=False, optional=True,
                         tooltip="custom only. Self-calibrating rescue: its threshold follows "
                         "this step's own picks and its budget the schedule's pace, so tau, "
                         "alpha and delayed are not used (hidden). Off: the paper's Eq. 10."),
        io.Float.Input("pace", **expert("pace"),
                       default=_A.pace, min=PACE_RANGE[0], max=PACE_RANGE[1], step=0.5,
                       optional=True,
                       tooltip="custom with adaptive only. How far past the schedule one "
                       "forward pass may reach by rescue, in 64ths of the schedule (steps of a "
                       "64-step schedule, the same share at any steps); 0 = no rescue. Default 3."),
        _float("anchor_quantile", _A.anchor_quantile, "custom with adaptive only. A frontier "
               "token is rescued when its margin is at least this quantile of the margins of "
               "the tokens the schedule itself commits this step (0.5 = their median).",
               optional=True),
    ]


def _preset_tooltip() -> str:
    return ("A preset sets every field below (greyed out, showing its values; fields it does "
            "not use are hidden) and runs the sampler's steps, never costing more forward passes "
            "than the official sampler. custom: use the fields. "
            + "; ".join(f"{name}: {p.summary}" for name, p in PRESETS.items()) + ".")


@register_node(menu=70)
class LADRPolicyNode(io.ComfyNode):
    """LADR rescue policy: the paper's settings, delayed rescue, off, or every field by hand."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="LADR_Policy",
            display_name="LADR Policy",
            category="LADR",
            search_aliases=["rescue", "ladr settings"],
            description="Phase-aware rescue policy of LADR (paper Sec. 3.3). A preset sets "
            "every field; choose 'custom' to edit them. The sampler's steps set the price.",
            inputs=[io.Combo.Input("preset", options=PRESET_OPTIONS, default="paper",
                                   tooltip=_preset_tooltip(),
                                   extra_dict={"ladr_presets": preset_table(),
                                               "ladr_switch": switch_table()}),
                    *field_inputs()],
            outputs=[io.Custom(POLICY_TYPE).Output(
                "policy", tooltip="LADR strategy (its policy) for DiMOO Sampling Rule.")],
        )

    @classmethod
    def validate_inputs(cls, preset: object = ABSENT) -> bool | str:
        """Names only `preset`, so its message shows once, on it (nodes/validate.py)."""
        if preset is ABSENT or preset in PRESET_OPTIONS:
            return True
        return (f"LADR Policy: preset {preset!r} is not one of {PRESET_OPTIONS}; choose one of "
                "them (a workflow saved with a preset this version no longer has keeps its "
                "other widgets)")

    @classmethod
    def execute(cls, preset: str, exploration_end: float, refinement_start: float,
                tau_exploration: float, tau_structure: float, tau_refinement: float,
                alpha_exploration: float, alpha_structure: float, alpha_refinement: float,
                kernel_size: int, metric: str, candidates: str, delayed: bool,
                selection: str = _D.selection, rescue_token: str = _D.rescue_token,
                seen_only: bool = _D.seen_only, adaptive: bool = False, pace: float = _A.pace,
                anchor_quantile: float = _A.anchor_quantile) -> io.NodeOutput:
        fields = PolicyFields(exploration_end, refinement_start, tau_exploration, tau_structure,
                              tau_refinement, alpha_exploration, alpha_structure,
                              alpha_refinement, kernel_size, metric, candidates, delayed,
                              selection, rescue_token, seen_only, adaptive, pace,
                              anchor_quantile)
        check_numbers("LADR Policy", asdict(fields))  # a preset does not read the fields
        return io.NodeOutput(checked("LADR Policy", lambda: build_strategy(preset, fields)))


_P = ProphetPolicy()


@register_node(menu=80)
class ProphetPolicyNode(io.ComfyNode):
    """Prophet's early-commit thresholds, for the sampler's 'prophet' strategy."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        def th(name: str, i: int, when: str) -> object:
            return io.Float.Input(name, default=_P.thresholds[i], min=0.0, max=100.0, step=0.1,
                                  tooltip=f"Mean top1-top2 logit gap over the masked tokens at "
                                  f"which an image commits all of them, {when}. "
                                  f"Default {_P.thresholds[i]:g}.")

        def bound(name: str, i: int, what: str) -> object:
            return io.Float.Input(name, default=_P.progress_bounds[i], min=0.0, max=1.0,
                                  step=0.01, tooltip=f"Progress (step / T) where the {what} "
                                  f"threshold starts. Default {_P.progress_bounds[i]:g}.")

        inputs = [th("threshold_early", 0, "before middle_start"),
                  th("threshold_middle", 1, "from middle_start"),
                  th("threshold_late", 2, "from late_start"),
                  bound("middle_start", 0, "middle"), bound("late_start", 1, "late")]
        output = io.Custom(POLICY_TYPE).Output(
            "policy", tooltip="Prophet strategy for DiMOO Sampling Rule (strategy 'prophet').")
        return io.Schema(node_id="LADR_ProphetPolicy", display_name="Prophet Policy",
                         category="LADR", inputs=inputs, outputs=[output],
                         search_aliases=["prophet", "early commit"],
                         description="Early-commit thresholds of Prophet, the comparison "
                         "method of the LADR paper. Connect to DiMOO Sampling Rule's policy with "
                         "strategy 'prophet'.")

    @classmethod
    def execute(cls, threshold_early: float, threshold_middle: float, threshold_late: float,
                middle_start: float, late_start: float) -> io.NodeOutput:
        # No validate_inputs: ranges are the schema's; the bounds' order is checked here once.
        check_numbers("Prophet Policy", {
            "threshold_early": threshold_early, "threshold_middle": threshold_middle,
            "threshold_late": threshold_late, "middle_start": middle_start,
            "late_start": late_start})  # NaN named by its widget, not the policy's field
        return io.NodeOutput(checked("Prophet Policy", lambda: Prophet(ProphetPolicy(
            thresholds=(float(threshold_early), float(threshold_middle), float(threshold_late)),
            progress_bounds=(float(middle_start), float(late_start))))))


def describe(strategy: Strategy) -> str:
    """How the stats line names a connected strategy."""
    return "Prophet Policy" if isinstance(strategy, Prophet) else "LADR Policy"
