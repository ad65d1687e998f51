"""Weights on disk: the official folder, fp8, ComfyUI's quantized format and GGUF (read, write,
convert), each a registered weight format (formats/), and the staging of converted folders.

Imports only ``ladr_core.dimoo.model``.
"""
