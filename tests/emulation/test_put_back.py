"""The emulation catches the GPU defects a reading of the code found: each fix is put
back into a scratch copy of the repository (the code as it was, as a text patch), a run of the
path it breaks goes through the emulated CUDA device in a fresh process, and the run must fail
with the emulation's message naming the patched file and line.

1. the preview table left on the CPU while the VQ runs on the GPU (images.py): each step's
   preview read the tokens back to the host inside the step loop;
2. the K-quant bit-shift tables built with ``torch.arange`` on the CPU (ggml.py): saving
   Q4_K_M with ``--device cuda`` met CUDA tensors;
9. the ML-Cache refresh indexing device tensors with a Python list (denoiser.py);
10. the prompt's padded ids and mask copied to the device for nothing (denoiser.py): two
   blocking copies per run, beyond the one a run may add to the sampler's reads.

The answer loop's (memory ones: lab/tests/emulation/test_put_back_memory.py):

1. every answer of a batch in one pass (answering.py): 64 captions on a 24 GiB card pass the
   memory the estimator grants for the answers in flight;
2. the whole quantized output head dequantized at once (transformer.py): about 3 GiB beyond the
   grant, at the 8B head's shape;
5. the pack's positions copied from pageable memory inside the answer loop (packed.py), and the
   official order's per-item counts made from Python data there (answer_rules.py): blocking
   copies the emulation now refuses in the answer loop as in the sampler's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PREVIEW_FIXED = '''    def preview(self, tokens: torch.Tensor, masked: torch.Tensor | None,
                grid: tuple[int, int]) -> torch.Tensor:'''


@dataclass(frozen=True)
class PutBack:
    finding: int
    file: str
    fixed: str  # the fixed code, found verbatim in the file
    broken: str  # the code as it was before the fix
    scenario: str  # what runs on the emulated device
    expect: tuple[str, str] | None = None  # (file, text): where the failure shows, if not at
    # the patched line itself (the first line of ``broken``)

    def where(self, root: Path) -> str:
        """``file:line`` the emulation must name, in the patched scratch copy."""
        file, text = self.expect or (self.file, self.broken.splitlines()[0].strip())
        lines = (root / file).read_text().splitlines()
        return f"{file}:{next(i + 1 for i, s in enumerate(lines) if text in s)}"


LOAD = """
import torch
from ladr_core.dimoo import load_dimoo, MLCacheConfig
from tests.kit.cuda_emu import emulated_cuda
from tests.kit.tiny_checkpoint import write_tiny_checkpoint
import tempfile, pathlib
folder = write_tiny_checkpoint(pathlib.Path(tempfile.mkdtemp()) / "ck")
"""
PREVIEW_RUN = LOAD + """
pipe = load_dimoo(folder, device="cpu", dtype=torch.float32)  # built on the offload device
getattr(pipe, "_cpu_table", pipe.preview_table)()  # made at load, as nano's fitted table
with emulated_cuda():
    pipe.vq.to("cuda"); pipe.transformer.to("cuda")  # a host's full load
    step = lambda r: torch.cat([pipe.preview(r["tokens"], r["masked"], r["grid"]).flatten(),
                                r["masked"].flatten().float()])
    pipe.generate("a red circle", width=32, height=32, steps=6, seed=0, callback=step)
"""
BUDGET_RUN = LOAD + """
with emulated_cuda() as emu:
    pipe = load_dimoo(folder, device="cuda", dtype=torch.float32)
    before = emu.h2d + emu.reads
    pipe.generate("a red circle", width=32, height=32, steps=6, seed=0, decode=False)
    extra = (emu.h2d + emu.reads) - before
    if sum(extra.values()) > 1:  # tests/core/test_gpu.py: a run adds at most one sync
        raise SystemExit(f"[cuda-emulation:budget] {sum(extra.values())} blocking transfers "
                         f"in one run outside the step loop: {dict(extra)}")
"""

# what the GGUF writer does per tensor with --device cuda (the tiny checkpoint's rows are too
# short for K-quants, which need multiples of 256: Q4_K_M writes them as Q8_0 there)
K_QUANT_RUN = """
import torch
from ladr_core.dimoo.weights import ggml
from tests.kit.cuda_emu import emulated_cuda
with emulated_cuda():
    w = torch.randn(4, 512, generator=torch.Generator().manual_seed(0)).cuda()
    for name in ("Q5_K", "Q6_K"):
        ggml.quantize(w, name)
"""

# the answer loop samples in float64 on purpose (the official softmax): the emulation's float64
# refusal is set aside there (tests/emulation/test_understand_gpu.py), every other one is raised
REFUSED = """
bad = [v for v in emu.violations if v.kind != "float64"]
if bad:
    raise SystemExit(f"[cuda-emulation:{bad[0].kind}] {bad[0].message} at {bad[0].where}")
"""
ANSWER_RUN = LOAD + """
with emulated_cuda(raise_on_violation=False) as emu:
    pipe = load_dimoo(folder, device="cuda", dtype=torch.float32)
    images = torch.rand(3, 32, 32, 3, generator=torch.Generator().manual_seed(0))
    pipe.understand(images, "a red circle", max_answer=16, block_length=8, size="as is",
                    max_batch=2)
""" + REFUSED
# the official order with its stop, where one answer ends mid-block: the next joins the other
# at another step of the block, so a pass holds items with different counts
MIXED_COUNTS_RUN = LOAD + """
cpu = load_dimoo(folder, device="cpu", dtype=torch.float32)
images = torch.rand(3, 32, 32, 3, generator=torch.Generator().manual_seed(0))
kw = dict(max_answer=16, block_length=8, steps=6, size="as is", temperature=1.0)
runs = [[], [], []]
for i in range(3):
    cpu.understand(images[i:i + 1], "a red circle", seed=i, callback=runs[i].append, **kw)
others = {t for r in runs[1:] for t in r[-1]["tokens"][0].tolist()}
def ends_item_0_mid_block():
    for j, rec in enumerate(runs[0][:3], 1):  # 3 steps a block
        w = rec["tokens"][0].tolist()
        for p, t in enumerate(w):
            if t == cpu.ids.mask:
                break
            if j % 3 and t not in w[:p] and t not in others:
                return t
    raise SystemExit("the scenario found no end token that ends item 0 mid-block")
end = ends_item_0_mid_block()
with emulated_cuda(raise_on_violation=False) as emu:
    pipe = load_dimoo(folder, device="cuda", dtype=torch.float32)
    pipe.answer_end_id = end
    res = pipe.understand(images, "a red circle", rule="official+stop", max_batch=2, **kw)
    assert res.nfe[0] < 6 == res.nfe[1], res.nfe  # item 0 ended mid-block, item 1 did not
""" + REFUSED

CASES = [
    PutBack(1, "ladr_core/dimoo/pipeline.py", PREVIEW_FIXED + '''
        """Cheap preview [B, h*p, w*p, 3] on the tokens' device: table gather, masked tokens
        grey; no decoder call, no host copy of the tokens."""
        return preview_from_table(self.preview_table(tokens.device), tokens, masked, grid)''',
            PREVIEW_FIXED + '''
        """The code before the fix: the table stays where the pipeline was built."""
        return preview_from_table(self._cpu_table(), tokens, masked, grid)

    def _cpu_table(self) -> torch.Tensor:
        if getattr(self, "_preview_table", None) is None:
            self._preview_table = self.preview_table().cpu()
        return self._preview_table''', PREVIEW_RUN,
            ("ladr_core/dimoo/model/vq.py", "codes = _grid(tokens, grid).flatten(1).to(")),
    PutBack(2, "ladr_core/dimoo/weights/ggml.py",
            "bits = (q >> 4) << torch.arange(8, device=q.device).view(1, 8, 1)",
            "bits = (q >> 4) << torch.arange(8).view(1, 8, 1)", K_QUANT_RUN),
    PutBack(2, "ladr_core/dimoo/weights/ggml.py",
            "(2 * torch.arange(4, device=q.device)).view(1, 1, 4, 1)",
            "(2 * torch.arange(4)).view(1, 1, 4, 1)", K_QUANT_RUN),
    PutBack(9, "ladr_core/dimoo/denoise/denoiser.py",
            "rows = slice(a, None, len(items))",
            "rows = list(range(a, logits.shape[0], len(items)))", LOAD + """
with emulated_cuda():
    pipe = load_dimoo(folder, device="cuda", dtype=torch.float32)
    pipe.generate("a red circle", width=32, height=32, steps=12, seed=0, decode=False,
                  cache=MLCacheConfig.ladr())
""", ("ladr_core/dimoo/denoise/denoiser.py", "self.caches[item].store(logits[rows]")),
    PutBack(10, "ladr_core/dimoo/denoise/denoiser.py",
            "self.input_ids, self.attention_mask = batch.input_ids, batch.attention_mask",
            "self.input_ids, self.attention_mask = (batch.input_ids.to(self.device), "
            "batch.attention_mask.to(self.device))", BUDGET_RUN),
    PutBack(5, "ladr_core/dimoo/model/packed.py",
            "return cls(lengths, tuple(runs), to_device(starts, device), to_device(positions, "
            "device))",
            "return cls(lengths, tuple(runs), starts.to(device), positions.to(device))",
            ANSWER_RUN),
    PutBack(5, "ladr_core/dimoo/tasks/answer_rules.py",
            "keep = rank < index(counts, masked.device)[:, None]",
            "keep = rank < torch.tensor(counts, device=masked.device)[:, None]", MIXED_COUNTS_RUN),
]

def scratch_copy(tmp: Path, case: PutBack, parts: tuple[str, ...] = ("ladr_core", "tests/kit")
                 ) -> Path:
    """The product's code and the tests' kit copied (and ``parts``), with the defect put back."""
    root = tmp / "repo"
    for part in parts:
        shutil.copytree(REPO / part, root / part, ignore=shutil.ignore_patterns("__pycache__"))
    path = root / case.file
    text = path.read_text()
    assert text.count(case.fixed) == 1, (
        f"finding {case.finding}'s fix is no longer in {case.file} as this test knows it; "
        "update the put-back to the code as it is now")
    path.write_text(text.replace(case.fixed, case.broken))
    return root


def run(root: Path, scenario: str) -> subprocess.CompletedProcess:
    # a test worker's share of the cores (tests/conftest.py) goes on to the scenario's process
    threads = {k: os.environ[k] for k in ("OMP_NUM_THREADS",) if k in os.environ}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(scenario)], cwd=root,
                          capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin",
                               "HOME": str(Path.home()), **threads})


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"finding{c.finding}-{c.file.split('/')[-1]}-{c.broken[:24]}")
def test_a_finding_put_back_is_caught_and_named(case: PutBack, tmp_path: Path) -> None:
    root = scratch_copy(tmp_path, case)
    done = run(root, case.scenario)
    assert done.returncode != 0, "the emulation did not catch the defect put back"
    tail = done.stderr.strip().splitlines()[-1]
    assert "[cuda-emulation:" in tail, done.stderr[-3000:]
    assert f"{case.where(root)} (" in tail, tail


@pytest.mark.parametrize("scenario", [PREVIEW_RUN, BUDGET_RUN, ANSWER_RUN, MIXED_COUNTS_RUN],
                         ids=["preview", "budget", "answer", "mixed-counts"])
def test_the_scenarios_pass_on_the_fixed_code(scenario: str) -> None:
    """Without a put-back the same runs end cleanly: the failures above are the defects'."""
    done = run(REPO, scenario)
    assert done.returncode == 0, done.stderr[-3000:]
