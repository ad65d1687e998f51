"""Compile DiMOO: opt-in `torch.compile` of the transformer (LADR_DIMOO_MODEL in -> out).

Like ComfyUI's TorchCompileModel: the first run of each new shape pays the compile (logged),
later runs reuse it; the loaded model stays eager for workflows that skip this node.
"""

from __future__ import annotations

from ladr_core import COMPILE_BACKENDS, COMPILE_MODES

from . import host, register_node
from .handles import MODEL_TYPE, DiMOOModel

io, _ = host.v3()


def compile_model(model: DiMOOModel, backend: str, mode: str) -> DiMOOModel:
    """A handle on the pipeline's compiled view (kept on the pipeline: one compile per shape)."""
    if not isinstance(model, DiMOOModel):
        raise ValueError(f"model: expected a DiMOO model from Load DiMOO Model (got "
                         f"{type(model).__name__})")
    view = model.pipe.compile(backend=backend, mode=mode)
    return DiMOOModel(pipe=view, key=model.key, name=f"{model.name} (compiled, {backend})",
                      patcher=model.patcher)


@register_node(menu=110)
class CompileDiMOO(io.ComfyNode):
    """Opt-in torch.compile of the DiMOO transformer; connect between loader and sampler."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="LADR_CompileDiMOO",
            display_name="Compile DiMOO (torch.compile)",
            category="LADR",
            search_aliases=["torch.compile", "compile", "speed", "inductor"],
            description="Compiles the DiMOO transformer with torch.compile for faster steps on "
            "a GPU. The first run of each new size/prompt length pays a one-time compile "
            "(about a minute for the 8B model, logged); later runs reuse it.",
            inputs=[
                io.Custom(MODEL_TYPE).Input(
                    "model", tooltip="DiMOO model from Load DiMOO Model."),
                io.Combo.Input(
                    "backend", options=list(COMPILE_BACKENDS), default="inductor",
                    tooltip="inductor: fused GPU kernels (the fast one). aot_eager / eager: "
                    "no code generation, for debugging."),
                io.Combo.Input(
                    "mode", options=list(COMPILE_MODES), default="default",
                    tooltip="default: quick compile. max-autotune-no-cudagraphs: slower "
                    "compile that tries more kernels (inductor only)."),
            ],
            outputs=[io.Custom(MODEL_TYPE).Output(
                "model", tooltip="The same model, sampling through the compiled transformer.")],
        )

    @classmethod
    def execute(cls, model: DiMOOModel, backend: str, mode: str) -> io.NodeOutput:
        return io.NodeOutput(compile_model(model, backend, mode))
