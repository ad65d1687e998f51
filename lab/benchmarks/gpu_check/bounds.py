"""Section a's bounded checks, where a format rounds: logits in bf16 and the self-score.

**bf16 logits, every weight format.** The device under test runs the format as users run it
(stored weights as the format stores them, computed in bf16); tokens then need not equal the
CPU's, so the logits are compared instead, teacher-forced: the same input states (taken from
the CPU's float32 run) through both. Reference L_ref: the CPU in float32 on the same quantized
weights. The CPU in bf16 on the same stored weights gives the rounding this arithmetic makes,
e_cpu = max |L_cpu,bf16 - L_ref|. The device's bf16 run is held to

    max |L_dev,bf16 - L_ref| <= 2 e_cpu,

the triangle inequality through L_ref taking the device's rounding to be no larger than the
CPU's for the same operations (both accumulate matrix products in float32 and round to bf16).
The factor 2 comes from the inequality; nothing was fitted.

**Self-score, float32.** The score is a mean of log-softmax values read at re-masked tokens.
log_softmax is 1-Lipschitz in each coordinate up to its normaliser, so
|delta log p_i| <= |delta x_i| + |delta logsumexp(x)| <= 2 max |delta x|: the device's score may
differ from the CPU's by at most 2 max |delta guided logits| on the score's own inputs (the
same re-masked tokens, same block draws), plus the float32 rounding of the log-softmax itself
(8 units in the last place of the largest logit).
"""

from __future__ import annotations

from typing import Any

import torch

from ladr_core.dimoo.runs import item_generator
from ladr_core.dimoo.tasks.selfscore import block_masks

from .cases import FORMATS, PROMPT, format_model
from .models import CodesPipeline, to_device

__all__ = ["bf16_rows", "self_score_row", "trajectory_states"]

EPS32 = torch.finfo(torch.float32).eps


def trajectory_states(ref: CodesPipeline, strategy: Any, steps: int
                      ) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Input states (tokens, masked) [1, N] of the CPU's greedy run: the first (all masked) and
    those after about a third and two thirds of its steps."""
    records: list[tuple[torch.Tensor, torch.Tensor]] = []
    ref.generate(PROMPT, steps=steps, temperature=0.0, strategy=strategy, decode=False,
                 callback=lambda r: records.append((r["tokens"].clone(), r["masked"].clone())))
    n = ref.default_size // ref.vq_factor
    first = (torch.zeros(1, n * n, dtype=torch.long), torch.ones(1, n * n, dtype=torch.bool))
    picks = sorted({len(records) // 3, 2 * len(records) // 3} - {len(records) - 1})
    return [first, *(records[i] for i in picks if 0 <= i < len(records) - 1)]


def _logits(pipe: CodesPipeline, states: list[tuple[torch.Tensor, torch.Tensor]]
            ) -> torch.Tensor:
    """Guided logits of every state's masked tokens [M, K] (float32, CPU)."""
    out = []
    with torch.no_grad():
        for tokens, masked in states:
            den = pipe.make_denoiser(PROMPT)
            logits = den(tokens.to(den.device), masked.to(den.device))
            out.append(logits[masked.to(logits.device)].float().cpu())
    return torch.cat(out)


def bf16_rows(ref: CodesPipeline, device: torch.device,
              states: list[tuple[torch.Tensor, torch.Tensor]]) -> list[dict[str, Any]]:
    """One row per format (plain bf16 weights first): the errors, the bound, passed or not."""
    rows = []
    for fmt in ("bf16", *FORMATS):
        row: dict[str, Any] = {"format": fmt}
        try:
            if fmt == "bf16":
                f32, b16 = ref.transformer, to_device(ref.transformer, torch.device("cpu"))
                b16 = b16.to(torch.bfloat16)
            else:
                f32, b16 = (format_model(ref, fmt, d) for d in (torch.float32, torch.bfloat16))
            want = _logits(ref.with_transformer(f32), states)
            cpu = _logits(ref.with_transformer(b16), states)
            dev = _logits(ref.with_transformer(to_device(b16, device)), states)
            e_cpu = float((cpu - want).abs().max())
            e_dev = float((dev - want).abs().max())
            row.update({"logits": int(want.shape[0]), "max_abs_ref": float(want.abs().max()),
                        "err_cpu_bf16": e_cpu, "err_device_bf16": e_dev,
                        "bound": 2 * e_cpu, "ratio_to_bound": e_dev / (2 * e_cpu) if e_cpu
                        else None, "check": "passed" if e_dev <= 2 * e_cpu else "failed"})
        except Exception as exc:  # noqa: BLE001 - one format's failure is a finding, not the end
            row.update({"check": "error", "error": f"{type(exc).__name__}: {exc}"[:400]})
        rows.append(row)
    return rows


def _guided(pipe: CodesPipeline, tokens: torch.Tensor, masks: torch.Tensor, passes: int
            ) -> torch.Tensor:
    den = pipe.make_denoiser([PROMPT] * (tokens.shape[0] * passes))
    dev = den.device
    cond, uncond = den.masked_logits(tokens.repeat_interleave(passes, dim=0).to(dev),
                                     masks.reshape(-1, masks.shape[-1]).to(dev))
    cfg = den.cfg
    return ((1.0 + cfg) * cond - cfg * uncond if uncond is not None else cond).float().cpu()


def self_score_row(ref: CodesPipeline, dev: CodesPipeline, tokens: torch.Tensor,
                   config: Any) -> dict[str, Any]:
    """The self-score of the same final tokens on both sides, held to the module's bound."""
    n = ref.default_size // ref.vq_factor
    s_cpu = ref.self_score(tokens, PROMPT, seed=0, config=config)
    s_dev = dev.self_score(tokens, PROMPT, seed=0, config=config)
    masks = torch.stack([block_masks((n, n), config, item_generator(i, torch.device("cpu")))
                         for i in range(tokens.shape[0])])
    g_cpu = _guided(ref, tokens, masks, config.passes)
    g_dev = _guided(dev, tokens, masks, config.passes)
    bound = 2 * float((g_dev - g_cpu).abs().max()) + 8 * EPS32 * float(g_cpu.abs().max())
    diff = float((s_dev.score - s_cpu.score).abs().max())
    return {"kind": config.kind, "score_cpu": s_cpu.score.tolist(),
            "score_device": s_dev.score.tolist(), "abs_diff": diff, "bound": bound,
            "check": "passed" if diff <= bound else "failed"}
