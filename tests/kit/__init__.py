"""What the product's tests and the lab share, once: deterministic fakes (``fakes``), the
host-sync counter (``syncs``), bytes of live tensor storages (``live_bytes``), the tiny random
checkpoint (``tiny_checkpoint``), models in the loader's memory layouts (``variants``), the
strict stand-in for ComfyUI's V3 API (``comfy_stand_in``), a loopback ComfyUI-Distributed
cluster (``comfy_cluster``), the CUDA emulation (``cuda_emu``), an API workflow run in process
(``run_graph``), the shipped templates' names (``templates``) and the 8B model's VQ configuration
(``vq_8b``). Imports only the product, never the lab: `tests.kit` is imported from the checkout's
root (``tests`` has no __init__.py, like ``lab``), by the product's tests and by the lab."""
