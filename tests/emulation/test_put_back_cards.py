"""The card rules (tests/kit/cuda_emu/cards.py) catch defects put back into a scratch copy of the repository (as
test_put_back.py does for the device findings), each named with its file and line:

1. memory at a card's size: DiMOO VQ Decode's decoder taking the whole batch at once instead
   of one image at a time runs out of an 8 GB card at 1024 px (torch.OutOfMemoryError with
   CUDA's message; the emulation's note names the line that asked);
2. a refused ``_scaled_mm``: the fp8 weight handed over row-major (cuBLASLt multiplies a
   row-major by a column-major matrix only); the code's own fallback would hide it, so the run
   raises kernel fallbacks;
3. a fall to math attention: an attention mask on the packed rows, which have none, sends
   grouped-head attention off flash (no mask) and memory-efficient (no grouped heads);
4. an allocation during a graph capture: LADR's phase table made per call from a host tensor
   through pinned memory (``devices.to_device``), inside the step rule the sampler captures as
   a CUDA graph, instead of filled on the device once per process;
5. a removed stream wait: block streaming's ``wait_event`` on the copy of a block's weights
   taken out, run with copies that land late (``completion="late"``): the block's weights are
   used before they arrive.

The same scenarios on the code as it is pass (the last tests), so each failure is the defect's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_put_back import LOAD, PutBack, run, scratch_copy

VQ_RUN = """
import torch
from diffusers import VQModel
from tests.kit.vq_8b import VQ_CONFIG
from tests.kit.cuda_emu import emulated_cuda
from ladr_core.dimoo.model.vq import decode_codes
with emulated_cuda(card="rtx2080", storage="meta"):  # 8 GB; shapes only
    with torch.device("meta"):
        vq = VQModel.from_config(VQ_CONFIG)  # the 8B checkpoint's VQ, as gpu_estimate builds it
    vq = vq.to_empty(device="cuda").eval().requires_grad_(False)
    codes = torch.zeros(4, 64 * 64, dtype=torch.long, device="cuda")  # 4 images of 1024 px
    decode_codes(vq, codes, (64, 64), check_range=False)
"""
LAYOUT_RUN = LOAD + """
import sys
from ladr_core.dimoo import save
layout = {layout!r}
with emulated_cuda(card="rtx4090", fallbacks="raise"):  # sm 8.9: fp8, flash attention
    if layout != "bf16":
        folder = save.main([str(folder), str(folder.parent / "q"), "--weight-dtype", layout,
                            "--device", "cuda"])
    pipe = load_dimoo(folder, device="cuda", dtype=torch.bfloat16)
    pipe.generate("a red circle", width=32, height=32, steps=6, seed=0, decode=False)
"""
CASES = [
    PutBack(1, "ladr_core/dimoo/model/vq.py",
            "step = max(1, chunk)",
            "step = codes.shape[0]  # the whole batch through the decoder at once",
            VQ_RUN, ("ladr_core/dimoo/model/vq.py", "return _decode_chunk(vq, codes)")),
    PutBack(2, "ladr_core/dimoo/weights/quant.py",
            "return torch._scaled_mm(xq, w.t(), scale_a=s_x, scale_b=s_w.float(), "
            "out_dtype=out_dtype)",
            "return torch._scaled_mm(xq, w.t().contiguous(), scale_a=s_x, "
            "scale_b=s_w.float(), out_dtype=out_dtype)",
            LAYOUT_RUN.format(layout="comfy_fp8_e4m3fn")),
    PutBack(3, "ladr_core/dimoo/model/packed.py",
            "att = F.scaled_dot_product_attention(qs, ks, vs, enable_gqa=gqa)",
            "att = F.scaled_dot_product_attention(qs, ks, vs, attn_mask=torch.ones(m, length, "
            "dtype=torch.bool, device=qs.device), enable_gqa=gqa)",
            LAYOUT_RUN.format(layout="bf16")),
]
CAPTURE_RUN = LOAD + """
with emulated_cuda():
    pipe = load_dimoo(folder, device="cuda", dtype=torch.float32)
    pipe.generate("a red circle", width=32, height=32, steps=6, seed=0, decode=False,
                  strategy="ladr")
"""
PHASE_SIGNATURE = """def phase_table(values: tuple, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    \"\"\"values as a tensor on `device`, made once per process by fills (Python scalars enter
    kernels as arguments: no host -> device copy, no sync).\"\"\"
"""
PHASE_FIXED = "@functools.lru_cache(maxsize=64)\n" + PHASE_SIGNATURE + """    out = torch.empty(len(values), dtype=dtype, device=device)
    for i, v in enumerate(values):
        out[i].fill_(v)
    return out"""
CASES.append(PutBack(4, "ladr_core/strategies/select.py", PHASE_FIXED, PHASE_SIGNATURE + """\
    from ..devices import to_device  # per call, from host values through pinned memory

    return to_device(torch.tensor(values, dtype=dtype), device)""", CAPTURE_RUN,
                     ("ladr_core/strategies/select.py", "return to_device(torch.tensor(")))
STREAM_RUN = LOAD + """
with emulated_cuda(completion="late"):
    pipe = load_dimoo(folder, device="cuda", dtype=torch.float32, offload_blocks=True)
    pipe.generate("a red circle", width=32, height=32, steps=6, seed=0, decode=False)
"""
WAIT = """        if self.stream is not None:
            torch.cuda.current_stream(self.device).wait_event(self.copied[s])
        views = _views(self.loaded[s], self.stored[i], self.offsets[i])"""
CASES.append(PutBack(5, "ladr_core/dimoo/model/offload.py", WAIT,
                     WAIT.splitlines()[-1] + "  # the slot's copy used without waiting for it",
                     STREAM_RUN, ("ladr_core/dimoo/model/offload.py",
                                  "return [flat[o:o + _nbytes(t)]")))
KINDS = {1: "[cuda-emulation:oom]", 2: "[cuda-emulation:kernel] _scaled_mm refused",
         3: "[cuda-emulation:kernel] attention: falls back to math",
         4: "[cuda-emulation:capture] pinned host memory allocated",
         5: "[cuda-emulation:order]"}


@pytest.mark.parametrize("case", CASES, ids=["oom-vq-decode", "scaled-mm-row-major",
                                             "math-attention", "pinned-in-capture",
                                             "removed-stream-wait"])
def test_a_card_rule_defect_put_back_is_caught_and_named(case: PutBack, tmp_path: Path) -> None:
    root = scratch_copy(tmp_path, case)
    done = run(root, case.scenario)
    assert done.returncode != 0, "the emulation did not catch the defect put back"
    tail = done.stderr.strip().splitlines()[-1]
    assert KINDS[case.finding] in tail, done.stderr[-3000:]
    assert f"{case.where(root)} (" in tail, tail


def test_the_card_scenarios_pass_on_the_code_as_it_is() -> None:
    """All the scenarios, one after the other in one process (one start-up, for CI's time)."""
    done = run(Path(__file__).resolve().parents[2],
               "\n".join(c.scenario + "\nprint('scenario done')" for c in CASES))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("scenario done") == len(CASES)
