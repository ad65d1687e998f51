"""ComfyUI-LADR: ComfyUI entry point (V3 `comfy_entrypoint`) and the live-preview web folder.

Importing this file is cheap and probes nothing: nodes, torch and the model code are imported
only when ComfyUI calls `comfy_entrypoint()`.
"""

import os
import sys

WEB_DIRECTORY = "./web"

_ROOT = os.path.dirname(os.path.abspath(__file__))


async def comfy_entrypoint():
    """Return the pack's ComfyExtension (ComfyUI >= 0.33 V3 loader, nodes.py load_custom_node)."""
    if _ROOT not in sys.path:
        # `ladr_core` sits beside this file; ComfyUI imports us as a package by folder name, so
        # make the sibling importable (appended: never shadows ComfyUI's own `nodes` module).
        sys.path.append(_ROOT)
    from .nodes import extension_class

    return extension_class()()


__all__ = ["WEB_DIRECTORY", "comfy_entrypoint"]
