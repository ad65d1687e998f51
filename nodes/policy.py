"""LADR Policy node: a preset or every field of `ladr_core.LADRPolicy` -> LADR_POLICY socket.

The fields map 1:1 onto the paper's phase-aware policy Pi(t) = (alpha_t, tau_t) (Sec. 3.3.2):
phase bounds on t_eff, margin threshold tau and rescue ratio alpha per phase, the k x k
dilation kernel of Eq. 9, the ranking metric / candidate set ablations (Sec. 4.3) and the
delayed-rescue variant (Table 5). Invalid combinations fail at validation time with
LADRPolicy's own message, so the UI shows it before anything runs.
"""

from __future__ import annotations

from ladr_core.policy import (
    CANDIDATES,
    METRICS,
    POLICY_PRESETS,
    RESCUE_TOKENS,
    SELECTIONS,
    LADRPolicy,
)

from . import host
from .handles import POLICY_TYPE

io, _ = host.v3()

# Stable option names (saved in workflows): the four, then the paper's ablations.
PRESETS = ["paper", "delayed", "off", "custom", *sorted(k for k in POLICY_PRESETS
                                                       if k not in ("paper", "delayed"))]
NO_TAU = -1.0
"""Widget value meaning tau = None (no threshold, the paper's refinement phase)."""

_D = LADRPolicy()


def _float(name: str, default: float, tip: str, lo: float = 0.0) -> object:
    return io.Float.Input(name, default=default, min=lo, max=1.0, step=0.01, tooltip=tip)


def _tau(v: float | None) -> float:
    return NO_TAU if v is None else v


def field_inputs() -> list:
    """One widget per LADRPolicy field (triples split per phase), defaults = the paper's."""
    phases = ("exploration", "structure", "refinement")
    out = [
        _float("exploration_end", _D.phase_bounds[0], "t_eff below this is the exploration "
               "phase (paper: 0.2). Must be <= refinement_start."),
        _float("refinement_start", _D.phase_bounds[1], "t_eff at or above this is the "
               "refinement phase (paper: 0.7)."),
    ]
    for i, ph in enumerate(phases):
        out.append(_float(f"tau_{ph}", _tau(_D.tau[i]), f"Margin threshold tau in the {ph} "
                          "phase: a frontier token is rescued only if p(top1)-p(top2) > tau "
                          "(Eq. 10). -1 = no threshold.", lo=NO_TAU))
    for i, ph in enumerate(phases):
        out.append(_float(f"alpha_{ph}", _D.alpha[i], f"Rescue ratio alpha in the {ph} "
                          "phase: at most floor(|frontier| * alpha) tokens rescued per step."))
    out += [
        io.Int.Input("kernel_size", default=_D.kernel_size, min=1, max=15, step=2,
                     tooltip="Side k of the k x k dilation kernel that finds the frontier "
                     "(Eq. 9); odd. Paper: 3."),
        io.Combo.Input("metric", options=list(METRICS), default=_D.metric,
                       tooltip="How frontier candidates are ranked: margin (paper), "
                       "confidence or random (ablations)."),
        io.Combo.Input("candidates", options=list(CANDIDATES), default=_D.candidates,
                       tooltip="Which masked tokens are candidates: neighbors = the frontier "
                       "(paper); non_neighbors / random are ablations with the same budget."),
        io.Boolean.Input("delayed", default=_D.delayed,
                         tooltip="Delayed rescue: no rescue in the exploration phase "
                         "(paper Table 5; better text rendering, ~2.5x instead of ~4x)."),
        # Added after the paper's fields, optional: workflows saved without them get the defaults.
        io.Combo.Input("selection", options=list(SELECTIONS), default=_D.selection, optional=True,
                       tooltip="Standard selection: top1 = most probable tokens first (paper); "
                       "gumbel = the DiMOO baseline's noisy rule, which places objects "
                       "before filling the background."),
        io.Combo.Input("rescue_token", options=list(RESCUE_TOKENS), default=_D.rescue_token,
                       optional=True,
                       tooltip="Token a rescued position receives: sample (paper) or argmax "
                       "(the most probable token, the one the margin certifies)."),
        io.Boolean.Input("seen_only", default=_D.seen_only, optional=True,
                         tooltip="Rescue only neighbours of tokens decoded before this step, "
                         "never next to tokens picked in the same step."),
    ]
    return out


def build_policy(preset: str, **f: object) -> LADRPolicy:
    """Preset -> its LADRPolicy; `custom` builds one from the field widgets (validated)."""
    if preset == "off":
        return LADRPolicy(alpha=(0.0, 0.0, 0.0))
    if preset in POLICY_PRESETS:
        return POLICY_PRESETS[preset]
    if preset != "custom":
        raise ValueError(f"preset: {preset!r} is not one of {PRESETS}")
    taus = tuple(None if float(f[f"tau_{p}"]) < 0 else float(f[f"tau_{p}"])
                 for p in ("exploration", "structure", "refinement"))
    return LADRPolicy(
        phase_bounds=(float(f["exploration_end"]), float(f["refinement_start"])),
        tau=taus,
        alpha=tuple(float(f[f"alpha_{p}"]) for p in ("exploration", "structure", "refinement")),
        kernel_size=int(f["kernel_size"]),
        metric=str(f["metric"]),
        candidates=str(f["candidates"]),
        delayed=bool(f["delayed"]),
        selection=str(f.get("selection", _D.selection)),
        rescue_token=str(f.get("rescue_token", _D.rescue_token)),
        seen_only=bool(f.get("seen_only", _D.seen_only)),
    )


class LADRPolicyNode(io.ComfyNode):
    """LADR rescue policy: the paper's settings, delayed rescue, off, or every field by hand."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="LADR_Policy",
            display_name="LADR Policy",
            category="LADR",
            search_aliases=["rescue", "ladr settings"],
            description="Phase-aware rescue policy of LADR (paper Sec. 3.3). Presets ignore "
            "the field widgets; choose 'custom' to use them.",
            inputs=[io.Combo.Input(
                "preset", options=PRESETS, default="paper",
                tooltip="paper: the published settings (~4x). delayed: no rescue in the "
                "exploration phase (~2.5x, better text). off: rescue disabled. custom: use the "
                "fields below. nano: picked for the built-in DiMOO-nano on its validation "
                "prompts, set the sampler's steps to 128 with it (~18 forward passes). "
                "ablation_*: the paper's Sec. 4.3 variants.",
            ), *field_inputs()],
            outputs=[io.Custom(POLICY_TYPE).Output("policy", tooltip="LADR policy.")],
        )

    @classmethod
    def validate_inputs(cls, preset: str, **fields: object) -> bool | str:
        if any(v is None for v in fields.values()):
            return True  # a field is linked from another node: checked at run time
        try:
            build_policy(preset, **fields)
        except (ValueError, KeyError, TypeError) as exc:
            return f"LADR Policy: {exc}"
        return True

    @classmethod
    def execute(cls, preset: str, **fields: object) -> io.NodeOutput:
        return io.NodeOutput(build_policy(preset, **fields))
