"""Issue 61's memory fixes put back into a scratch copy of the repository (as test_put_back.py
does) and caught on an emulated card at the 8B model's shape (tests/kit/shaped_8b.py, shapes
only), each run out of memory with CUDA's message and the emulation's note naming the line,
or past the memory the plan grants (``shaped_8b.within_grant``):

1. an ML-Cache that outlives its image (denoiser.py): every finished image's K/V and logits
   kept, so a queue of 24 prompts runs a 24 GB card out at a new image's first refresh;
3. the preview table built inside the first step (pipeline.py, images.py, vq.py): 256 codes
   per decoder call, beside the step's memory, and not in ``run_memory``, so a card sized by
   the plan runs out in the build;
4. the float32 RoPE of q and k out of place (transformer.py), where a pass peaks, or a layer's
   q, k, v kept alive through its MLP (packed.py): four images at 1024 px hold more than the
   plan grants them.

The same scenarios on the code as it is pass (the last test), so each failure is the defect's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_put_back import REPO, PutBack, run, scratch_copy

QUEUE = """
import torch
from ladr_core.dimoo import MLCacheConfig
from tests.kit.cuda_emu import emulated_cuda
from tests.kit.shaped_8b import finish_after, pipeline_8b
with emulated_cuda(card="rtx4090", storage="meta"):  # 24 GB, shapes only
    pipe = pipeline_8b()
    with finish_after(2):
        pipe.generate(["a red circle"] * {prompts}, width={px}, height={px}, steps=8,
                      strategy="baseline", cache={cache}, decode=False)
"""
PREVIEW = """
import torch
from ladr_core.dimoo import MLCacheConfig
from tests.kit.cuda_emu import emulated_cuda
from tests.kit.shaped_8b import finish_after, pipeline_8b
with emulated_cuda(storage="meta") as emu:
    pipe = pipeline_8b(layers=2, vq=True, vq_codes=1024)  # no preview table
    job = pipe.prepare_text(["a red circle"], width=512, height=512)
    need = pipe.run_memory(job, 1, MLCacheConfig())
    emu.memory.limit(emu.memory.reserved + need + 64 * 2 ** 20, 0)  # the card the plan asks for
    with finish_after(1):
        pipe.generate("a red circle", width=512, height=512, steps=8, strategy="baseline",
                      cache=MLCacheConfig(), decode=False,
                      callback=lambda r: pipe.preview(r["tokens"][:1], r["masked"][:1], r["grid"]))
"""
GRANT = """
import torch
from ladr_core import Baseline
from ladr_core.dimoo.model.memory import working_memory
from tests.kit.cuda_emu import emulated_cuda
from tests.kit.shaped_8b import finish_after, pipeline_8b, within_grant
with emulated_cuda(storage="meta") as emu:
    pipe = pipeline_8b(layers=2)  # a pass peaks inside one layer
    job = pipe.prepare_text(["a red circle"] * 4, width=1024, height=1024)
    branches, length = job.rows(pipe.encode)
    grant = working_memory(pipe.config, 4, length, job.layout.n_codes, pipe.ids.codebook_size,
                           branches=branches, dtype=torch.bfloat16)
    with finish_after(2), within_grant(emu, grant):  # allocated bytes, as the plan counts them
        pipe.run(job, Baseline(), steps=8, decode=False, max_batch=4)
"""
RELEASE = "        caches.release_others(items)  # finished items' caches go before new ones are made\n"
PREBUILD = """        if callback is not None and self.vq is not None:  # a callback may draw previews:
            self.preview_table()  # the table is made now, not in the first step beside sampling
"""
ROPE = """    del x1, x2
    xf = xf.mul(cos) if xf is x else xf.mul_(cos)
    return xf.add_(rotated.mul_(sin)).to(x.dtype)"""
CASES = {
    "cache-outlives-its-image": [PutBack(
        1, "ladr_core/dimoo/denoise/denoiser.py", RELEASE, "",
        QUEUE.format(prompts=24, px=512, cache="MLCacheConfig()"),
        ("ladr_core/dimoo/denoise/cache.py", "self.kv = [(like.new_empty(shape)"))],
    "preview-table-in-the-first-step": [
        PutBack(3, "ladr_core/dimoo/pipeline.py", PREBUILD, "", PREVIEW,
                ("ladr_core/dimoo/model/vq.py", "sample = vq.decoder(vq.post_quant_conv(")),
        PutBack(3, "ladr_core/dimoo/pipeline.py", ", self.preview_bytes())", ")", PREVIEW),
        PutBack(3, "ladr_core/dimoo/model/vq.py", "PREVIEW_CHUNK = 32 ",
                "PREVIEW_CHUNK = 256 ", PREVIEW)],
    "qkv-alive-through-the-mlp": [PutBack(
        4, "ladr_core/dimoo/model/packed.py",
        "        del q, k, v  # not alive through the MLP nor the next layer's projections\n", "",
        GRANT, ("ladr_core/dimoo/model/transformer.py", "gate = self.act(self.ff_proj(y))"))],
    "rope-out-of-place": [PutBack(
        4, "ladr_core/dimoo/model/transformer.py", ROPE,
        "    return (xf * cos + rotated * sin).to(x.dtype)  # out of place, as before",
        GRANT)],
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_memory_fix_put_back_runs_the_card_out_and_names_the_line(name: str,
                                                                    tmp_path: Path) -> None:
    first, *more = CASES[name]
    root = scratch_copy(tmp_path, first)
    for case in more:  # the same finding's other parts, in the same scratch copy
        path = root / case.file
        text = path.read_text()
        assert text.count(case.fixed) == 1, f"{case.file} no longer holds {case.fixed!r}"
        path.write_text(text.replace(case.fixed, case.broken))
    done = run(root, first.scenario)
    assert done.returncode != 0, "the emulation did not catch the defect put back"
    tail = done.stderr.strip().splitlines()[-1]
    assert "[cuda-emulation:oom]" in tail or "[cuda-emulation:memory]" in tail, \
        done.stderr[-3000:]
    assert f"{first.where(root)} (" in tail, tail


def test_the_queue_scenarios_pass_on_the_code_as_it_is() -> None:
    """All the scenarios, one after the other in one process (one start-up, for CI's time)."""
    scenarios = {CASES[name][0].scenario for name in CASES}
    done = run(REPO, "\n".join(s + "\nprint('scenario done')" for s in scenarios))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("scenario done") == len(scenarios)
