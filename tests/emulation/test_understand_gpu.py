"""``pipe.understand`` on the emulated CUDA device (tests/kit/cuda_emu): every answer rule gives the
CPU run's answer tokens and forwards (float32, same seed, temperature 0 and 1), with no host
tensor meeting a device tensor, no blocking host-to-device copy and no host read in the answer
loop beyond its documented ones (the emulation refuses them there, as in the sampler's loop). The one thing the emulation
refuses that the understanding path does on purpose is float64 on the device: the official loop
computes its confidences (softmax) and its Gumbel division in float64
(text_understanding_generator.py), and so do we, in tasks/answering.py only."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ladr_core.dimoo import DiMOOPipeline, answer_rule_names, load_dimoo
from tests.kit.cuda_emu import emulated_cuda

QUESTIONS = ["a red circle", "the square left of the circle"]


@pytest.fixture(scope="module")
def cpu_pipe(dimoo_checkpoint: Path) -> DiMOOPipeline:
    return load_dimoo(dimoo_checkpoint, device="cpu", dtype=torch.float32)


@pytest.mark.parametrize("rule", answer_rule_names())
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_understand_on_the_device(rule: str, temperature: float, cpu_pipe: DiMOOPipeline,
                                  dimoo_checkpoint: Path) -> None:
    image = torch.rand(1, 32, 32, 3, generator=torch.Generator().manual_seed(3))
    kw = dict(max_answer=16, block_length=8, rule=rule, temperature=temperature, seed=4,
              size="as is")
    stopping = cpu_pipe.answer_end_id  # None on the tiny vocabulary: the stop is tested on CPU
    want = cpu_pipe.understand(image, QUESTIONS, **kw)
    with emulated_cuda(raise_on_violation=False) as emu:
        pipe = load_dimoo(dimoo_checkpoint, device="cuda", dtype=torch.float32)
        assert pipe.device.type == "cuda" and pipe.answer_end_id == stopping
        got = pipe.understand(image, QUESTIONS, **kw)
    assert [t.tolist() for t in got.tokens] == [t.tolist() for t in want.tokens]
    assert got.nfe == want.nfe and got.text == want.text
    kinds = {(v.kind, Path(v.where.split(":")[0]).name) for v in emu.violations}
    assert kinds <= {("float64", "answering.py")}, emu.violations
    # the answer loop's reads are its documented ones (where.py DOCUMENTED: _advance)
    loop_reads = sum(n for where, n in emu.loop_reads.items() if "answering.py" in where)
    if rule == "official":  # the official stop's read after each block, nothing more
        assert loop_reads == 16 // 8
    assert 0 < loop_reads <= got.passes
    assert not [w for w in emu.h2d if "answering.py" in w]


@pytest.mark.parametrize("rule", ["official", "entropy+stop"])
def test_a_rolling_batch_on_the_device_gives_the_single_answers(
        rule: str, cpu_pipe: DiMOOPipeline, dimoo_checkpoint: Path) -> None:
    """Four images, two answers in flight on the emulated device: each answer is the CPU's
    single answer of its image and seed, with nothing refused but the float64 sampling."""
    images = torch.rand(4, 32, 32, 3, generator=torch.Generator().manual_seed(5))
    kw = dict(max_answer=16, block_length=8, rule=rule, temperature=1.0, size="as is")
    with emulated_cuda(raise_on_violation=False) as emu:
        pipe = load_dimoo(dimoo_checkpoint, device="cuda", dtype=torch.float32)
        got = pipe.understand(images, QUESTIONS[0], seed=2, max_batch=2, **kw)
    kinds = {(v.kind, Path(v.where.split(":")[0]).name) for v in emu.violations}
    assert kinds <= {("float64", "answering.py")}, emu.violations
    for i in range(4):
        one = cpu_pipe.understand(images[i:i + 1], QUESTIONS[0], seed=2 + i, **kw)
        assert got.tokens[i].tolist() == one.tokens[0].tolist() and got.nfe[i] == one.nfe[0]
