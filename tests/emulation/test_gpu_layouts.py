"""Every weight layout on the emulated CUDA device: ``python -m ladr_core.dimoo.save --device
cuda`` for every format of save.FORMATS writes the files ``--device cpu`` writes, and the saved
checkpoint loads on the device and generates with no violation (tests/kit/cuda_emu), with the
CPU's tokens wherever the layer's arithmetic does not depend on the device.

Where it does, tokens are not compared: ComfyUI's fp8 format calibrates its input scales in the
device's compute dtype (bfloat16 on CUDA, float32 on a CPU: ladr_core/dimoo/input_ranges.py) and
its linears use ``torch._scaled_mm`` on CUDA of compute capability >= 8.9 (weights/quant.py),
a dequantised matmul elsewhere.
"""

from __future__ import annotations

import filecmp
from pathlib import Path

import pytest
import torch

from ladr_core.dimoo import load_dimoo, save
from tests.kit.cuda_emu import emulated_cuda

DEVICE_ARITHMETIC = {f for f in save.FORMATS if f.startswith("comfy_fp8")}
KW = dict(width=32, height=32, steps=6, seed=1, strategy="ladr")


def _save(source: Path, out: Path, fmt: str, device: str) -> Path:
    name = out / ("model.gguf" if fmt.startswith("Q") else "model")
    extra = ["--calibration-size", "32"] if fmt in DEVICE_ARITHMETIC else []
    return save.main([str(source), str(name), "--weight-dtype", fmt, "--device", device,
                      *extra])


def _files(path: Path) -> list[Path]:
    return sorted(p.relative_to(path) for p in path.rglob("*") if p.is_file()) \
        if path.is_dir() else [Path()]


@pytest.mark.parametrize("fmt", save.FORMATS)
def test_save_on_the_device_and_generate(fmt: str, dimoo_checkpoint: Path, tmp_path: Path
                                         ) -> None:
    on_cpu = _save(dimoo_checkpoint, tmp_path / "cpu", fmt, "cpu")
    with emulated_cuda() as emu:
        on_device = _save(dimoo_checkpoint, tmp_path / "cuda", fmt, "cuda")
        got = load_dimoo(on_device, device="cuda", dtype=torch.float32).generate("a red circle",
                                                                                **KW)
        assert got.tokens.device.type == "cuda" and not emu.violations
        assert sum(emu.loop_reads.values()) <= got.steps
        tokens = got.tokens.cpu()
    assert _files(on_cpu) == _files(on_device)
    if fmt in DEVICE_ARITHMETIC:
        return
    for rel in _files(on_cpu):
        assert filecmp.cmp(on_cpu / rel, on_device / rel, shallow=False), rel
    want = load_dimoo(on_cpu, device="cpu", dtype=torch.float32).generate("a red circle", **KW)
    assert torch.equal(tokens, want.tokens)
