"""ML-Cache Options node -> LADR_MLCACHE socket (`ladr_core.MLCacheConfig`): Lumina-DiMOO's
Max-Logit Cache (ladr_core/dimoo/denoise/cache.py). `preset` is the last input, so workflows saved
before it load as "custom"; under a preset web/ladr_policy.js greys the fields.
"""

from __future__ import annotations

import ladr_core

from . import host, register_node
from .handles import CACHE_TYPE
from .validate import check_numbers

io, _ = host.v3()

PRESETS = {"official": ladr_core.MLCacheConfig, "ladr": ladr_core.MLCacheConfig.ladr}
PRESET_OPTIONS = ["custom", *PRESETS]
FIELDS = ("cache_ratio", "warmup_ratio", "refresh_interval")


def preset_table() -> dict[str, dict[str, object]]:
    """What each preset sets, for the web extension (same shape as the LADR Policy node's)."""
    return {name: {"fields": {f: getattr(make(), f) for f in FIELDS}, "steps": None}
            for name, make in PRESETS.items()}


def build_cache(cache_ratio: float, warmup_ratio: float, refresh_interval: int,
                preset: str = "custom") -> object:
    """Widget values -> MLCacheConfig (its own validation names the bad argument)."""
    if preset in PRESETS:  # the fields are not read, but NaN there is a damaged file
        check_numbers("ML-Cache Options", {"cache_ratio": cache_ratio,
                                           "warmup_ratio": warmup_ratio})
        return PRESETS[preset]()
    if preset != "custom":
        raise ValueError(f"ML-Cache Options: preset {preset!r} is not one of {PRESET_OPTIONS}")
    try:
        return ladr_core.MLCacheConfig(
            cache_ratio=float(cache_ratio),
            warmup_ratio=float(warmup_ratio),
            refresh_interval=int(refresh_interval),
        )
    except (TypeError, ValueError) as exc:
        raise ValueError(f"ML-Cache Options: {exc}") from exc


@register_node(menu=90)
class MLCacheOptions(io.ComfyNode):
    """Options of DiMOO's Max-Logit Cache; connect to the sampler's optional `cache` input."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="LADR_MLCacheOptions",
            display_name="ML-Cache Options",
            category="LADR",
            search_aliases=["ml-cache", "max logit cache", "speed"],
            description="Lumina-DiMOO's Max-Logit Cache: reuse the computation of confident "
            "tokens between steps. With LADR choose the preset 'ladr'. The fields' defaults "
            "are the official ones.",
            inputs=[
                io.Float.Input("cache_ratio", default=0.9, min=0.01, max=0.99, step=0.01,
                               tooltip="Fraction of image tokens whose computation is reused "
                               "each cached step (official default 0.9; higher = faster)."),
                io.Float.Input("warmup_ratio", default=0.3, min=0.0, max=0.99, step=0.01,
                               tooltip="Fraction of the schedule run without the cache at the "
                               "start, measured by how much of the image is still masked, so "
                               "it also works with LADR (official default 0.3; lower = faster)."),
                io.Int.Input("refresh_interval", default=5, min=1, max=1000,
                             tooltip="Recompute every token every N steps after warm-up "
                             "(official default 5; higher = faster)."),
                io.Combo.Input("preset", options=PRESET_OPTIONS, default="custom",
                               tooltip="custom: the three fields above. official: Lumina-"
                               "DiMOO's defaults. ladr: for LADR runs; keeps every still-"
                               "masked and just-decoded token fresh and refreshes every 3 "
                               "steps and after a big rescue (the official settings lose "
                               "quality under LADR).",
                               extra_dict={"ladr_presets": preset_table()}),
            ],
            outputs=[io.Custom(CACHE_TYPE).Output("cache", tooltip="ML-Cache options.")],
        )

    # No validate_inputs: the schema's ranges, then MLCacheConfig's own check (nodes/validate.py).

    @classmethod
    def execute(cls, cache_ratio: float, warmup_ratio: float, refresh_interval: int,
                preset: str = "custom") -> io.NodeOutput:
        return io.NodeOutput(build_cache(cache_ratio, warmup_ratio, refresh_interval, preset))
