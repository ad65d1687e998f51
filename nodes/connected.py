"""Which checkpoint a node's output reaches, read from the API prompt ComfyUI is about to run,
before any node has run (DiMOO Canvas's grid check, nodes/canvas.py). A link is ``[source node
id, output index]``; a model comes through a ``model`` input from Load DiMOO Model, possibly
through a node that passes it on (Compile DiMOO).
"""

from __future__ import annotations

LOADER = "LADR_LoadDiMOOModel"


def _is_link(value: object) -> bool:
    return isinstance(value, list) and len(value) == 2 and isinstance(value[0], (str, int))


def _model_name(prompt: dict, node: dict) -> str | None:
    """The model_name of the Load DiMOO Model feeding ``node``'s model input, or None."""
    seen: set[str] = set()
    while node.get("class_type") != LOADER:
        link = node.get("inputs", {}).get("model")
        if not _is_link(link) or str(link[0]) in seen or str(link[0]) not in prompt:
            return None
        seen.add(str(link[0]))
        node = prompt[str(link[0])]
    name = node.get("inputs", {}).get("model_name")
    return name if isinstance(name, str) else None


def connected_models(prompt: object, node_id: object) -> list[str]:
    """The model_name of each checkpoint a node fed by ``node_id``'s outputs samples with,
    sorted; empty when none is known (no prompt: the node was called outside ComfyUI)."""
    if not isinstance(prompt, dict) or node_id is None:
        return []
    names = {_model_name(prompt, node) for node in prompt.values() if isinstance(node, dict)
             and any(_is_link(v) and str(v[0]) == str(node_id)
                     for v in node.get("inputs", {}).values())}
    return sorted(n for n in names if n is not None)
