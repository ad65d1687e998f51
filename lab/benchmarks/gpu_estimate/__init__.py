"""Memory and compute of the 8B model without a GPU (``python -m lab.benchmarks.gpu_estimate``):
the pack's own code (pipeline, denoiser, ML-Cache, weight layouts, VQ decode) runs on an emulated
CUDA device whose tensors hold shapes only (tests/kit/cuda_emu, ``storage="meta"``); the
emulation's model of PyTorch's caching allocator gives peak allocated and reserved bytes and
FlopCounterMode the FLOPs per call. Method and results: docs/reports/GPU.md, Sec. 7."""
