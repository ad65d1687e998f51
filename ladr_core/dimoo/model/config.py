"""LLaDA model configuration and DiMOO special token ids.

`LLaDAConfig` mirrors the fields of the official LLaDA ``ModelConfig``
(``model/configuration_llada.py``) that change the forward pass; missing keys take its
defaults, and the result is checked against what the native model implements (llama blocks,
RoPE, RMSNorm, SiLU-gated MLP).

`DiMOOIds` holds the special token ids, one rule for the real model and the shipped ones:
each id key of config.json (`mask_token_id`, `newline_token_id`, `image_token_offset`,
`codebook_size`, `boi/eoi/boa/eoa_token_id`, `uncondition_token_id`) may be missing and then
takes the DiMOO default below; a missing `image_token_offset` is the official 126356 (hard-coded
by the official image utilities) when the codebook fits the logits width (the real head is
padded past 134548), else, for a checkpoint with its own special ids, the width minus
`codebook_size`. Rows above the codebook are padding, never read; a head too narrow is one
`CheckpointError` naming `image_token_offset` and the fix. Sizes must fit `max_sequence_length`
(prompt + h*(w+1) + 4 tokens); a RoPE model with DiMOO's special ids gets at least
`DIMOO_ROPE_CONTEXT`, as the official RoPE is computed for any length.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

__all__ = ["LLaDAConfig", "DiMOOIds", "DIMOO_DEFAULT_IDS", "DIMOO_ROPE_CONTEXT", "ConfigError",
           "SUPPORTED_ARCHITECTURES", "context_length", "has_official_ids"]

#: `architectures` entries of LLaDA-family checkpoints (LLaDA-8B and Lumina-DiMOO).
SUPPORTED_ARCHITECTURES = ("LLaDAModelLM", "LLaDAForMultiModalGeneration")


class ConfigError(ValueError):
    """config.json is not a LLaDA configuration the native model can run (message names the fix)."""


@dataclass(frozen=True)
class LLaDAConfig:
    """Architecture hyper-parameters of a LLaDA transformer (official field names). Defaults
    are the official ``ModelConfig``'s except those the native model requires (llama blocks,
    RoPE, RMSNorm, SiLU, no weight tying): ``LLaDAConfig(d_model=...)`` is LLaDA-8B-style."""

    d_model: int = 768
    n_heads: int = 12
    n_kv_heads: int | None = None
    n_layers: int = 12
    mlp_ratio: int = 4
    mlp_hidden_size: int | None = None
    activation_type: str = "silu"
    block_type: str = "llama"
    block_group_size: int = 1
    alibi: bool = False
    rope: bool = True
    rope_full_precision: bool = True
    rope_theta: float = 10000.0
    multi_query_attention: bool | None = None
    attention_layer_norm: bool = False
    input_emb_norm: bool = False
    layer_norm_type: str = "rms"
    layer_norm_with_affine: bool = True
    rms_norm_eps: float = 1e-5
    max_sequence_length: int = 1024
    include_qkv_bias: bool | None = False
    include_bias: bool = False
    bias_for_layer_norm: bool | None = None
    scale_logits: bool = False
    vocab_size: int = 50257
    embedding_size: int | None = None
    weight_tying: bool = False
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    # ---- derived sizes -------------------------------------------------------------------
    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def effective_n_kv_heads(self) -> int:
        """Official rule: n_kv_heads, or 1 with multi_query_attention, else n_heads."""
        if self.n_kv_heads is not None:
            return self.n_kv_heads
        return 1 if self.multi_query_attention else self.n_heads

    @property
    def hidden_size(self) -> int:
        """MLP inner size: mlp_hidden_size, else mlp_ratio * d_model (official)."""
        return self.mlp_hidden_size if self.mlp_hidden_size is not None else self.mlp_ratio * self.d_model

    @property
    def n_embeddings(self) -> int:
        """Rows of wte / ff_out: embedding_size or vocab_size (official)."""
        return self.embedding_size or self.vocab_size

    @property
    def qkv_bias(self) -> bool:
        return bool(self.include_bias or self.include_qkv_bias)

    @property
    def norm_bias(self) -> bool:
        return self.include_bias if self.bias_for_layer_norm is None else bool(self.bias_for_layer_norm)

    # ---- construction --------------------------------------------------------------------
    def __post_init__(self) -> None:
        self.validate()

    def validate(self, source: str = "LLaDAConfig") -> None:
        """Raise ConfigError for values the native model does not implement."""
        problems = _type_problems(self)
        if problems:
            raise ConfigError(f"{source}: " + "; ".join(problems) + ". Fix the field in config.json.")
        if self.d_model % self.n_heads or self.head_dim % 2:
            problems.append(f"d_model {self.d_model} must split into n_heads {self.n_heads} heads of even size")
        if self.n_heads % self.effective_n_kv_heads:
            problems.append(f"n_heads {self.n_heads} must be a multiple of n_kv_heads {self.effective_n_kv_heads}")
        if self.block_type != "llama":
            problems.append(f"block_type must be 'llama' (got {self.block_type!r})")
        if self.activation_type not in ("silu", "gelu", "relu"):
            problems.append(f"activation_type must be silu/gelu/relu for llama blocks (got {self.activation_type!r})")
        if self.layer_norm_type not in ("rms", "default"):
            problems.append(f"layer_norm_type must be 'rms' or 'default' (got {self.layer_norm_type!r})")
        if not self.rope or self.alibi:
            problems.append("rope must be true and alibi false (LLaDA is a RoPE model)")
        if self.block_group_size != 1:
            problems.append(f"block_group_size must be 1 (got {self.block_group_size})")
        if self.attention_layer_norm:
            problems.append("attention_layer_norm (QK-norm) is not used by LLaDA and not implemented")
        if not self.layer_norm_with_affine:
            problems.append("layer_norm_with_affine must be true")
        if self.n_embeddings < self.vocab_size:
            problems.append(f"embedding_size {self.embedding_size} is smaller than vocab_size {self.vocab_size}")
        if self.rope_theta <= 0 or self.rms_norm_eps <= 0:
            problems.append("rope_theta and rms_norm_eps must be positive")
        if problems:
            raise ConfigError(f"{source}: " + "; ".join(problems) + ". Use a LLaDA / Lumina-DiMOO config.json.")

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "config.json") -> LLaDAConfig:
        """Parse an official config.json dict (model_type "llada" or a supported architecture;
        unknown keys kept in ``extra``). Missing keys take the official ModelConfig defaults
        (block_type "sequential", ...), so validate() rejects an incomplete config."""
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: expected a JSON object, got {type(data).__name__}")
        model_type = data.get("model_type")
        archs = data.get("architectures") or []
        if model_type != "llada" and not any(a in SUPPORTED_ARCHITECTURES for a in archs):
            raise ConfigError(
                f"{source}: model_type is {model_type!r} and architectures {archs!r}; this is not a "
                "LLaDA checkpoint. Point the loader at a Lumina-DiMOO folder (model_type 'llada')."
            )
        official_defaults = {
            "activation_type": "swiglu", "block_type": "sequential", "rope": False,
            "layer_norm_type": "default", "weight_tying": True, "embedding_size": 50304,
        }
        names = {f.name for f in fields(cls)} - {"extra"}
        kwargs: dict[str, Any] = {k: data.get(k, official_defaults.get(k, _default(cls, k))) for k in names}
        kwargs["extra"] = {k: v for k, v in data.items() if k not in names}
        try:
            return cls(**kwargs)
        except ConfigError as exc:
            raise ConfigError(str(exc).replace("LLaDAConfig", source, 1)) from None
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{source}: invalid value ({exc}). Fix the field in config.json.") from None

    @classmethod
    def from_json(cls, path: str | Path) -> LLaDAConfig:
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}: not valid JSON ({exc}); re-download config.json") from None
        return cls.from_dict(data, source=str(path))

    def to_dict(self) -> dict[str, Any]:
        """Official-style config.json content (model_type "llada", architectures LLaDAModelLM)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        out.update(self.extra)
        out.setdefault("model_type", "llada")
        out.setdefault("architectures", ["LLaDAModelLM"])
        return out

    def replace(self, **changes: Any) -> LLaDAConfig:
        return dataclasses.replace(self, **changes)


#: size fields -> (may be null, largest value accepted). The bounds are far above any LLaDA
#: (LLaDA-8B: d_model 4096, 32 layers, 126464 vocab), low enough that a lying config.json cannot
#: make the meta model or the RoPE tables take unbounded time or memory.
_SIZE_FIELDS = {"d_model": (False, 1 << 16), "n_heads": (False, 1 << 10),
                "n_kv_heads": (True, 1 << 10), "n_layers": (False, 1 << 10),
                "mlp_ratio": (False, 1 << 8), "mlp_hidden_size": (True, 1 << 20),
                "block_group_size": (False, 1 << 10), "max_sequence_length": (False, 1 << 22),
                "vocab_size": (False, 1 << 24), "embedding_size": (True, 1 << 24)}
_BOOL_FIELDS = ("alibi", "rope", "rope_full_precision", "attention_layer_norm",
                "input_emb_norm", "layer_norm_with_affine", "include_bias", "scale_logits",
                "weight_tying")
_OPTIONAL_BOOLS = ("multi_query_attention", "include_qkv_bias", "bias_for_layer_norm")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _type_problems(config: Any) -> list[str]:
    """Each field of the wrong type or out of range, named (before any size is used)."""
    problems = []
    for name, (nullable, top) in _SIZE_FIELDS.items():
        value = getattr(config, name)
        if not (value is None and nullable) and not (_is_int(value) and 0 < value <= top):
            problems.append(f"{name} must be an int in [1, {top}]"
                            f"{' or null' if nullable else ''} (got {value!r})")
    for name in _BOOL_FIELDS + _OPTIONAL_BOOLS:
        value = getattr(config, name)
        if not isinstance(value, bool) and not (value is None and name in _OPTIONAL_BOOLS):
            problems.append(f"{name} must be true or false (got {value!r})")
    for name in ("rope_theta", "rms_norm_eps"):
        value = getattr(config, name)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or \
                not math.isfinite(value) or not 0 < value < 1e12:
            problems.append(f"{name} must be a finite positive number (got {value!r})")
    for name in ("activation_type", "block_type", "layer_norm_type"):
        if not isinstance(getattr(config, name), str):
            problems.append(f"{name} must be a string (got {getattr(config, name)!r})")
    return problems


def _default(cls: type, name: str) -> Any:
    for f in fields(cls):
        if f.name == name:
            return f.default
    raise KeyError(name)


@dataclass(frozen=True)
class DiMOOIds:
    """Special token ids of the DiMOO image layout (defaults: official ``config.py``)."""

    mask: int = 126336
    newline: int = 126084
    image_offset: int = 126356
    boa: int = 126354
    eoa: int = 126355
    boi: int = 126349
    eoi: int = 126350
    uncondition: int = 126351
    codebook_size: int = 8192

    #: config.json key for each field (the rule: module docstring).
    CONFIG_KEYS = {
        "mask": "mask_token_id", "newline": "newline_token_id", "image_offset": "image_token_offset",
        "codebook_size": "codebook_size", "boi": "boi_token_id", "eoi": "eoi_token_id",
        "boa": "boa_token_id", "eoa": "eoa_token_id", "uncondition": "uncondition_token_id",
    }

    @classmethod
    def from_config_dict(cls, data: dict[str, Any], source: str = "config.json",
                         width: int | None = None) -> DiMOOIds:
        """Each id key of config.json, else the DiMOO default; the offset rule (module
        docstring) needs the logits ``width`` (refusal: ``_offset_problem``)."""
        kwargs = {}
        for name, key in cls.CONFIG_KEYS.items():
            value = data.get(key, getattr(DIMOO_DEFAULT_IDS, name))
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"{source}: {key} must be a non-negative int (got {value!r})")
            kwargs[name] = value
        if kwargs["codebook_size"] <= 0:
            raise ConfigError(f"{source}: codebook_size must be positive")
        if width is not None and cls.CONFIG_KEYS["image_offset"] not in data:
            official = DIMOO_DEFAULT_IDS.image_offset
            if official + kwargs["codebook_size"] <= width:
                kwargs["image_offset"] = official
            else:
                kwargs["image_offset"] = max(0, width - kwargs["codebook_size"])
                if has_official_ids(cls(**kwargs)):
                    raise ConfigError(_offset_problem(source, width, kwargs["codebook_size"]))
        return cls(**kwargs)

    def validate_against(self, vocab_size: int, source: str = "config.json") -> None:
        """The codebook [offset, offset + K) must lie inside the logits width ``vocab_size``
        (module docstring), every special id in the vocabulary outside the codebook."""
        top = self.image_offset + self.codebook_size
        if top > vocab_size:
            raise ConfigError(_offset_problem(source, vocab_size, self.codebook_size,
                                              self.image_offset))
        for name in ("mask", "newline", "boa", "eoa", "boi", "eoi", "uncondition"):
            value = getattr(self, name)
            if value >= vocab_size:
                raise ConfigError(f"{source}: {self.CONFIG_KEYS[name]} {value} >= vocab size {vocab_size}")
            if self.image_offset <= value < top:
                raise ConfigError(f"{source}: {self.CONFIG_KEYS[name]} {value} lies inside the image codebook range")

    def to_config_dict(self) -> dict[str, int]:
        return {key: getattr(self, name) for name, key in self.CONFIG_KEYS.items()}


DIMOO_DEFAULT_IDS = DiMOOIds()


def _offset_problem(source: str, width: int, codebook: int, offset: int | None = None) -> str:
    """The one message of a head whose width and image offset cannot both be right (``offset``
    None: config.json has no key and the official 126356 does not fit)."""
    official = DIMOO_DEFAULT_IDS.image_offset
    said = (f"image_token_offset {offset}" if offset is not None else
            f"config.json has no image_token_offset, so the official {official}")
    top = (official if offset is None else offset) + codebook
    return (f"{source}: {said} + codebook_size {codebook} = {top} exceeds the logits width "
            f"{width} (embedding_size, else vocab_size): the image codes would not fit the head. "
            f"Set image_token_offset in config.json to where this checkpoint's {codebook} image "
            f"codes start (at most {max(0, width - codebook)}), or use the config.json shipped "
            "with these weights (re-download it)")


# Longest sequence accepted for a RoPE model carrying DiMOO's official special ids. LLaDA-8B's
# config.json says max_sequence_length 4096, but the official RotaryEmbedding recomputes its
# sin/cos table for any longer input (the official scripts take any --height / --width) and the
# official default size 1024x1024 needs 64 * 65 + 4 = 4164 image tokens plus the prompt. 8192
# (twice LLaDA's 4096; the 8B shape lab/benchmarks/gpu_check runs) admits 1024x1024 with prompts
# of ~4000 tokens, or 1024 x 1792 with a short prompt; a config.json saying more is obeyed.
DIMOO_ROPE_CONTEXT = 8192


def has_official_ids(ids: DiMOOIds) -> bool:
    """Whether ``ids`` are the real checkpoint's: DiMOO's special ids and 8192 codes (the image
    offset may follow the logits width, ``DiMOOIds.from_config_dict``)."""
    same = ("mask", "newline", "boa", "eoa", "boi", "eoi", "uncondition", "codebook_size")
    return all(getattr(ids, n) == getattr(DIMOO_DEFAULT_IDS, n) for n in same)


def context_length(config: LLaDAConfig, ids: DiMOOIds) -> int:
    """Longest input (tokens) the image-size check accepts: ``max_sequence_length``, at least
    DIMOO_ROPE_CONTEXT for a RoPE model with DiMOO's special ids (module docstring)."""
    if config.rope and not config.alibi and has_official_ids(ids):
        return max(config.max_sequence_length, DIMOO_ROPE_CONTEXT)
    return config.max_sequence_length
