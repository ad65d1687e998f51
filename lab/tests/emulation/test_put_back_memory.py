"""The answer loop's memory fixes put back on a scratch copy and caught by the lab's answer-memory
benchmark (lab/benchmarks/answer_memory.py on the CUDA emulation); the cases that need no lab
are tests/emulation/test_put_back.py, whose scratch copy and runner this file reuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.emulation.test_put_back import REPO, PutBack, run, scratch_copy

MEMORY_RUN = """
from lab.benchmarks.answer_memory import main
raise SystemExit(main({args}))
"""

MEMORY_CASES = [
    PutBack(1, "ladr_core/dimoo/tasks/answering.py",
            "while active := [i for i, it in enumerate(items) if not it.done][:most]:",
            "while active := [i for i, it in enumerate(items) if not it.done]:",
            MEMORY_RUN.format(args=["--images", "64"])),
    PutBack(2, "ladr_core/dimoo/model/transformer.py",
            "logits = _chunked_head(select, x, rows, bias, self.config.n_embeddings)",
            "logits = F.linear(x, select(rows, x.device, x.dtype), bias)",
            MEMORY_RUN.format(args=["--layout", "q4_k_m", "--layers", "1", "--images", "1"])),
]


@pytest.mark.parametrize("case", MEMORY_CASES, ids=lambda c: f"finding{c.finding}-memory")
def test_a_memory_finding_put_back_passes_the_grant(case: PutBack, tmp_path: Path) -> None:
    """The answer loop's two memory fixes put back (items in flight capped at the estimator's
    batch; the chunked answer head): the loop's pass peaks past the memory the estimator grants
    (lab/benchmarks/answer_memory.py says where it peaked)."""
    root = scratch_copy(tmp_path, case, ("ladr_core", "tests/kit", "lab"))
    done = run(root, case.scenario)
    assert done.returncode == 1, done.stderr[-3000:]
    tail = done.stderr.strip().splitlines()[-1]
    assert tail.startswith("[cuda-emulation:memory]") and "ladr_core/dimoo/" in tail, tail


@pytest.mark.parametrize("case", MEMORY_CASES, ids=["memory-in-flight", "memory-head"])
def test_the_memory_scenarios_pass_on_the_fixed_code(case: PutBack) -> None:
    """Without a put-back the same runs end cleanly: the failures above are the defects'."""
    done = run(REPO, case.scenario)
    assert done.returncode == 0, done.stderr[-3000:]
