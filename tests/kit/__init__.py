"""What the product's tests and the lab share, once: deterministic fakes (``fakes``), the
host-sync counter (``syncs``), bytes of live tensor storages (``live_bytes``), the tiny random
checkpoint (``tiny_checkpoint``), models in the loader's memory layouts (``variants``), the
strict stand-in for ComfyUI's V3 API (``comfy_stand_in``), a loopback ComfyUI-Distributed
cluster (``comfy_cluster``) and the CUDA emulation (``cuda_emu``). Imports only the product."""
