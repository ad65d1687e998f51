"""DiMOO Caption and DiMOO Ask: IMAGE (+ a question) -> text, Lumina-DiMOO's understanding path.

The nodes hold no decoding: ``pipe.prepare_understand`` checks the request before any weight
moves and ``pipe.run_understand`` runs the official block-wise answer loop under the chosen rule
(ladr_core/dimoo/understand.py). An IMAGE batch gets one answer per image, one line each in batch
order (so the text feeds DiMOO Sampler's prompt with one_prompt_per_line), run as a rolling batch
of what the memory left after loading holds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

import ladr_core
from ladr_core import InputError

from . import host, register_node, threads
from .handles import ANSWER_RULE_TYPE, MODEL_TYPE, DiMOOModel
from .sampler import SEED_MAX
from .validate import check_numbers, check_socket, input_error, node_error

io, _ = host.v3()

CAPTION, ASK = "DiMOO Caption", "DiMOO Ask"
CAPTION_QUESTION = "Describe the image."
"""What DiMOO Caption asks (the nano that answers was taught to caption with it)."""
EMPTY_QUESTION = "question is empty: write what to ask about the image"
AUTO_LENGTH = 0  # max_answer widget: the official 1024 tokens, or what the context holds
PROGRESS_TOTAL = 1000  # progress-bar units: thousandths of the record's `progress`
MODEL_FIX = ("pick a checkpoint that can answer in Load DiMOO Model: the Lumina-DiMOO folder, "
             "or the built-in nano that answers")
AS_IS_FIX = "set size to 'official', or crop or resize the image first (Upscale Image)"
LENGTH_FIX = "lower max_answer (0 = the longest answer the context holds), or shorten the question"


def one_line(text: str) -> str:
    """An answer on one line (a batch's answers are joined one per line)."""
    return " ".join(text.split())


def stats_line(res: Any) -> str:
    """'<rule>: N forwards per answer (official order: M), K answers, T s[; note]'."""
    nfe = [int(n) for n in res.nfe]
    each = ", ".join(map(str, nfe)) if len(nfe) <= 8 else f"{sum(nfe) / len(nfe):.1f} mean"
    answers = f"{len(nfe)} answer{'s' * (len(nfe) != 1)}"
    note = f"; {res.note}" if res.note else ""
    return (f"{res.rule}: {each} forwards per answer (official order: {res.steps}), "
            f"{answers}, {res.seconds:.2f} s{note}")


def make_callback(progress: host.Progress) -> Callable[[dict], None]:
    """After each forward: the interrupt check (a BaseException: never caught), the bar."""

    def on_forward(record: dict) -> None:
        host.check_interrupt()
        progress.update(round(progress.total * float(record["progress"])))

    return on_forward


def answer(node: str, model: DiMOOModel, image: torch.Tensor, question: str, *, rule: str,
           max_answer: int, temperature: float, seed: int, size: str,
           answer_rule: object = None) -> tuple[str, str]:
    """(the answers, one line per image; the stats line); the library's InputError becomes one
    message on this node's input. A connected `answer_rule` is used instead of `rule`."""
    check_socket("answer_rule", answer_rule, ladr_core.AnswerRule, "answer rule",
                 "DiMOO Answer Rule")
    rule = rule if answer_rule is None else answer_rule
    check_numbers(node, {"temperature": temperature})  # before the model's own checks
    if max_answer < AUTO_LENGTH:
        raise input_error(node, "max_answer", f"is {max_answer}",
                          "use a length in tokens, or 0 for the official 1024")
    pipe = model.pipe
    args = dict(max_answer=max_answer or None, rule=rule, temperature=temperature, size=size)
    try:
        job = pipe.prepare_understand(image, question, **args)
    except InputError as err:  # the node's own fixes: the loader, the size and length widgets
        fixes = {"model": MODEL_FIX}
        if size == "as is" and "not a multiple" in err.problem:
            fixes["image"] = AS_IS_FIX
        elif max_answer and "question and answer" in err.problem:  # the context overflows
            fixes["image"] = LENGTH_FIX + ("" if err.fix.startswith("shorten") else
                                           f"; or {err.fix}")
        raise node_error(node, err, fixes=fixes) from None
    host.load_to_device(model.patcher, pipe.understand_memory(job, 1))
    flying = pipe.answers_in_flight(job, host.free_memory(pipe.device))
    progress = host.Progress.start(PROGRESS_TOTAL)
    with threads.torch_threads():
        res = pipe.run_understand(job, seed=seed, callback=make_callback(progress),
                                  max_batch=flying)
    progress.update(progress.total)
    return "\n".join(one_line(t) for t in res.text), stats_line(res)


def model_input() -> object:
    return io.Custom(MODEL_TYPE).Input("model", tooltip="From Load DiMOO Model: a checkpoint "
                                       "that can answer (Lumina-DiMOO, or the built-in nano "
                                       "that answers; the plain built-in nano and dimoo-emoji "
                                       "cannot).")


def image_input() -> object:
    return io.Image.Input("image", tooltip="The picture; a batch gets one answer per image, "
                          "one per line.")


def answer_rule_input() -> object:
    """Appended last and optional: saved workflows run their `rule` widget's choice."""
    return io.Custom(ANSWER_RULE_TYPE).Input(
        "answer_rule", optional=True, tooltip="Optional DiMOO Answer Rule: the rule with its "
        "settings (tau, gamma, stop). Connected, it is used instead of the rule widget.")


def decoding_inputs() -> list:
    """rule, max_answer, temperature, seed and size (both nodes)."""
    names = ladr_core.answer_rule_names()
    sizes = list(ladr_core.dimoo.ANSWER_SIZES)
    return [
        io.Combo.Input("rule", options=names, default=names[0],
                       tooltip="How the answer's tokens are decoded. official: the official "
                       "order (a fixed number of forwards per block). threshold / entropy: "
                       "several confident tokens per forward (fewer forwards). +stop: end "
                       "as soon as the answer's end is decoded. The stats show the forwards. "
                       "Not used when answer_rule is connected."),
        io.Int.Input("max_answer", default=AUTO_LENGTH, min=AUTO_LENGTH, max=4096,
                     tooltip="Longest answer in tokens: up to 256, or a multiple of 256 (the "
                     "block length). 0 = the official 1024, or what the model's context "
                     "holds. The answer ends earlier at its end token."),
        io.Float.Input("temperature", default=0.0, min=0.0, max=5.0, step=0.05, round=0.01,
                       tooltip="0 = greedy, the official setting (the same answer every run; "
                       "seed not used)."),
        io.Int.Input("seed", default=0, min=0, max=SEED_MAX, control_after_generate=True,
                     tooltip="Random seed, used when temperature > 0; image i uses seed + i."),
        io.Combo.Input("size", options=sizes, default=sizes[0],
                       tooltip="official: crop each image to the official understanding size "
                       "closest to its shape (about 1024 x 1024 px in area on Lumina-DiMOO, "
                       "48 x 48 on nano). as is: keep the size (on the token grid; larger "
                       "costs more)."),
    ]


def outputs(text: str, tip: str) -> list:
    return [io.String.Output(text, tooltip=tip),
            io.String.Output("stats", tooltip="The rule, the forwards each answer took and the "
                             "official order's for a full answer, seconds.")]


@register_node(menu=150)
class DiMOOCaption(io.ComfyNode):
    """Describe an image in words with Lumina-DiMOO."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="LADR_DiMOOCaption",
            display_name="DiMOO Caption",
            category="LADR",
            search_aliases=["caption", "describe", "image to text", "interrogate", "dimoo",
                            "lumina"],
            description="Describes an image in words with Lumina-DiMOO (its official "
            "understanding path), one line per image: connect it to DiMOO Sampler's prompt.",
            inputs=[model_input(), image_input(), *decoding_inputs(), answer_rule_input()],
            outputs=outputs("caption", "One caption per image, one per line."),
        )

    @classmethod
    def execute(cls, model: DiMOOModel, image: torch.Tensor, rule: str, max_answer: int,
                temperature: float, seed: int, size: str,
                answer_rule: object = None) -> io.NodeOutput:
        return io.NodeOutput(*answer(CAPTION, model, image, CAPTION_QUESTION, rule=rule,
                                     max_answer=max_answer, temperature=temperature,
                                     seed=seed, size=size, answer_rule=answer_rule))


@register_node(menu=160)
class DiMOOAsk(io.ComfyNode):
    """Answer a question about an image with Lumina-DiMOO."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="LADR_DiMOOAsk",
            display_name="DiMOO Ask",
            category="LADR",
            search_aliases=["question", "vqa", "ask", "image to text", "dimoo", "lumina"],
            description="Answers a question about an image with Lumina-DiMOO (its official "
            "understanding path), one line per image.",
            inputs=[model_input(), image_input(),
                    io.String.Input("question", multiline=True,
                                    default="What color is the circle?",
                                    tooltip="The question; every image of a batch gets it."),
                    *decoding_inputs(), answer_rule_input()],
            outputs=outputs("answer", "One answer per image, one per line."),
        )

    @classmethod
    def validate_inputs(cls, question: str | None = None) -> bool | str:
        """Refuses an empty question before anything runs (a link-fed one is not passed)."""
        if isinstance(question, str) and not question.strip():
            return EMPTY_QUESTION
        return True

    @classmethod
    def execute(cls, model: DiMOOModel, image: torch.Tensor, question: str, rule: str,
                max_answer: int, temperature: float, seed: int, size: str,
                answer_rule: object = None) -> io.NodeOutput:
        return io.NodeOutput(*answer(ASK, model, image, question, rule=rule,
                                     max_answer=max_answer, temperature=temperature,
                                     seed=seed, size=size, answer_rule=answer_rule))
