"""One caption, every answer rule side by side: time and forwards per answer (CPU), and the 8B
model's cost per answer projected from its FLOPs per forward.

Measured: ``pipe.understand(scene, "Describe this image.")`` on one nano test scene (rendered
by lab/nano/scenes.py at the model's size), each rule of ``answer_rule_names()`` timed in
interleaved repetitions (lab/benchmarks/common.py), at temperature 0 (the official setting), the
answer as long as the model's context holds (nano: one block of 256). Reported per rule: the
median seconds per answer, its forwards, and the ratio of both to the official order.

The default model is the built-in nano that answers (``nano_mmu_model_path()``; the tests'
tiny fixture with ``--tiny`` or where it is missing). A checkpoint whose config.json says
``ladr_can_understand: false`` (the shipped nano, ``--model``) is run anyway with ``--force``,
for time and forwards only: its answers mean nothing, and a rule whose forwards depend on the
model's confidence (threshold, entropy, +stop) takes the forwards an untrained text head gives
it, not those of a model that can answer.

Projected (no GPU measured it): the FLOPs of one forward of the 8B-shaped model
(lab/benchmarks/gpu_check/models.py SHAPE_8B) on the official understanding row, a question of
``QUESTION_TOKENS`` tokens, a 1024 x 1024 px image (64 x 64 codes) and 1,024 answer tokens,
counted by ``FlopCounterMode`` on the meta device through the pack's own pass (packed.full_pass
+ the projection of a block-wide window), over the H100's dense bf16 peak
(gpu_estimate/compute.py ``H100_BF16_DENSE``): a floor per forward; x 128 for the official
order; and the answer's memory beside the weights (model/memory.py ``answer_memory``) of one
official answer at temperature 0 and above 0, sampled 256 window rows at a time as the pack
does and, for comparison, the whole window at once. ``python -m lab.benchmarks.understand`` ->
understand.json.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch

from lab.benchmarks.common import (
    RESULTS_DIR,
    apply_threads,
    base_parser,
    interleaved,
    model_for_bench,
    print_table,
    ratio,
    write_result,
)

QUESTION = "Describe this image."
QUESTION_TOKENS = 64  # the official system prompt (~35 tokens) and a short question
OFFICIAL_PX, OFFICIAL_ANSWER, OFFICIAL_STEPS, OFFICIAL_BLOCK = 1024, 1024, 128, 256


def scene_image(size: int, seed: int = 0) -> torch.Tensor:
    """A nano test scene at ``size`` px: IMAGE float [1, size, size, 3]."""
    from lab.nano import scenes

    scene = scenes.make_scene(np.random.default_rng(seed))
    pixels = scenes.render(scene.objects, size)
    return torch.from_numpy(pixels).float().div(255.0)[None]


def measure_rules(pipe: Any, image: torch.Tensor, reps: int, max_answer: int | None
                  ) -> list[dict[str, Any]]:
    """Every rule on the same caption, timed interleaved; its forwards and text."""
    from ladr_core.dimoo import answer_rule_names

    results: dict[str, Any] = {}

    def case(rule: str) -> Any:
        def run() -> None:
            results[rule] = pipe.understand(image, QUESTION, max_answer=max_answer, rule=rule,
                                            size="as is")
        return run

    timings = interleaved({r: case(r) for r in answer_rule_names()}, reps)
    base = timings["official"].median
    rows = []
    for rule, timing in timings.items():
        res = results[rule]
        rows.append({"rule": rule, "seconds": timing.median, "forwards": res.nfe[0],
                     "answer_tokens": int(res.tokens[0].numel()),
                     "time_vs_official": ratio(timing.median, base),
                     "forwards_vs_official": ratio(res.nfe[0], results["official"].nfe[0]),
                     "text": res.text[0]})
    return rows


def projected_8b(tiny: bool) -> dict[str, Any]:
    """FLOPs of one 8B understanding forward at the official defaults (module docstring)."""
    from torch.utils.flop_counter import FlopCounterMode

    from lab.benchmarks.gpu_check.models import SHAPE_8B, SHAPE_TINY
    from lab.benchmarks.gpu_estimate.compute import H100_BF16_DENSE
    from ladr_core.dimoo.model.config import LLaDAConfig
    from ladr_core.dimoo.model.memory import answer_memory
    from ladr_core.dimoo.model.packed import PackedRows, full_pass
    from ladr_core.dimoo.model.transformer import LLaDAModel
    from ladr_core.dimoo.tasks.answering import SAMPLE_CHUNK

    shape = SHAPE_TINY if tiny else SHAPE_8B
    grid = OFFICIAL_PX // 16
    length = QUESTION_TOKENS + grid * (grid + 1) + 2 + OFFICIAL_ANSWER + 2
    with torch.device("meta"):
        model = LLaDAModel(LLaDAConfig(**shape), init_std=None).to(torch.bfloat16)
    rows = PackedRows.from_lengths([length], "meta")
    per_window = {}
    for window in (OFFICIAL_BLOCK, OFFICIAL_ANSWER):  # the first block's window, the last's
        with FlopCounterMode(display=False) as counter:
            hidden = full_pass(model, torch.zeros(length, dtype=torch.long, device="meta"), rows)
            model.project(hidden[:window])
        per_window[window] = counter.get_total_flops()
    mean = sum(per_window.values()) / 2  # the window grows linearly over the blocks
    memory = {f"t{t:g}_{name}": answer_memory(LLaDAConfig(**shape), 1, length, OFFICIAL_ANSWER,
                                              noise=t > 0, entropy=False, chunk=chunk)
              for t in (0.0, 1.0) for name, chunk in (("chunked", SAMPLE_CHUNK),
                                                      ("whole", OFFICIAL_ANSWER))}
    return {"label": "projected (FLOPs over the H100 dense bf16 peak; no GPU measured it)",
            "shape": "tiny" if tiny else "8B", "row_tokens": length,
            "flops_per_forward": mean, "flops_first_block": per_window[OFFICIAL_BLOCK],
            "flops_last_block": per_window[OFFICIAL_ANSWER], "peak_flops": H100_BF16_DENSE,
            "floor_s_per_forward": mean / H100_BF16_DENSE,
            "official_floor_s_per_answer": OFFICIAL_STEPS * mean / H100_BF16_DENSE,
            "official_forwards": OFFICIAL_STEPS,
            "answer_memory_bytes": memory,
            "answer_memory_note": "model/memory.py answer_memory of one official answer beside "
            "the weights, at temperature 0 and 1, sampled SAMPLE_CHUNK rows at a time (as the "
            "pack does) or the whole window at once (as before the chunked answer loop)"}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="checkpoint folder (default: nano)")
    parser.add_argument("--force", action="store_true",
                        help="run a checkpoint that says it cannot understand (time only)")
    parser.add_argument("--max-answer", type=int, default=None)
    args = parser.parse_args(argv)
    apply_threads(args)
    import ladr_core

    mmu = ladr_core.nano_mmu_model_path()
    if args.model:
        folder, label = args.model, "given"
    elif not args.tiny and (mmu / "config.json").is_file():
        folder, label = mmu, "nano-mmu"
    else:
        folder, label = model_for_bench(args.out if args.tiny else RESULTS_DIR)
    pipe = ladr_core.load_dimoo(folder, dtype=torch.float32)
    forced = not pipe.can_understand
    if forced:
        if not args.force:
            parser.error(f"{folder} says ladr_can_understand: false; pass --force to time it")
        pipe = copy.copy(pipe)
        pipe.can_understand = True
    image = scene_image(pipe.default_size)
    max_answer = 32 if args.tiny and args.max_answer is None else args.max_answer
    rows = measure_rules(pipe, image, args.reps or (1 if args.tiny else 3), max_answer)
    state = "forced: answers mean nothing" if forced else "can answer"
    print_table(f"one caption on {label} ({state})",
                [{k: v for k, v in r.items() if k != "text"} for r in rows])
    projection = projected_8b(args.tiny)
    print_table("8B per answer, projected", [{k: v for k, v in projection.items()
                                              if k not in ("label", "answer_memory_bytes",
                                                           "answer_memory_note")}])
    print_table("8B answer memory beside the weights, GiB, projected",
                [{k: round(v / 2**30, 2) for k, v in projection["answer_memory_bytes"].items()}])
    doc = {"model": label, "forced": forced, "question": QUESTION,
           "image_px": pipe.default_size, "rules": rows, "projected_8b": projection}
    write_result("understand", doc, args.out)
    return doc


if __name__ == "__main__":
    main()
