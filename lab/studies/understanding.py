"""Answer accuracy against forwards of the answer rules on DiMOO-nano-mmu's test scenes.

    nice -n 10 python -m lab.studies.understanding --per-kind 40 \
        --json lab/results/understanding.json

Questions (``lab.nano.questions``): per kind (caption, color, shape, count, position) the first
``--per-kind`` test scenes that admit one, scene i = quality test spec i laid out with seed
100000 + i (never a training or tuning scene), one question each. Every rule answers every
question with ``pipe.understand`` at the sibling's default answer shape (``max_answer`` None:
the whole blocks its context holds), temperature 0 (official greedy):

* ``official``: the official low-confidence order at its default forwards;
* ``official+stop``, ``threshold`` (Fast-dLLM, tau 0.9), ``threshold+stop``, ``entropy``
  (EB-Sampler, gamma 0.1), ``entropy+stop``: the rules by name, their defaults;
* ``official@<rule>``: the official order at the forwards of each rule faster than it (steps =
  that rule's mean forwards per answer, rounded to a multiple of the block count).

Accuracy: ``questions.is_correct`` per answer; per kind, and overall = the mean of the kinds.
Forwards per answer: ``AnswerResult.nfe``. Paired, kind-stratified bootstrap 95 % intervals
(the same questions resampled for both sides) of each rule against the official order at its
default and at the same forwards. ``pick``: the fastest rule whose overall accuracy lies within
the official order's own 95 % interval, its forwards and the official order's. Writes the JSON
with the commit and machine; docs/reports/UNDERSTANDING_STUDY.md cites it
(lab/tests/docs/test_understanding_report.py holds the two together).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lab.benchmarks.common import env_info, json_text
from lab.nano import questions, scenes
from ladr_core import load_dimoo, nano_mmu_model_path

ROOT = Path(__file__).resolve().parents[2]
RULES = ("official", "official+stop", "threshold", "threshold+stop", "entropy", "entropy+stop")
N_BOOT = 4000


def question_set(per_kind: int) -> list[tuple[int, scenes.Scene, questions.Question]]:
    """(scene index, scene, question) of every kind, kind by kind."""
    return [item for kind in questions.KINDS for item in questions.set_questions(kind, per_kind)]


def answer_all(pipe, items: list, rule: str, steps: int | None, batch: int,
               shape: Any = None) -> dict[str, Any]:
    """Answers, verdicts and forwards of one rule over the items (batched, one image each);
    ``shape``: the answer shape (length, block) to run at ``steps`` (None: the default)."""
    texts, nfe, official_steps = [], [], None
    for lo in range(0, len(items), batch):
        part = items[lo:lo + batch]
        images = torch.from_numpy(np.stack([scenes.render(s.objects) for _, s, _ in part]))
        res = pipe.understand(images.float() / 255, [q.text for _, _, q in part], rule=rule,
                              steps=steps, max_answer=shape and shape.length,
                              block_length=shape and shape.block_length)
        texts += res.text
        nfe += res.nfe
        official_steps = res.steps
    correct = [questions.is_correct(q, t, s.objects)
               for (_, s, q), t in zip(items, texts, strict=True)]
    return {"rule": rule, "steps": official_steps, "answers": texts, "correct": correct, "nfe": nfe,
            "nfe_mean": float(np.mean(nfe))}


def kind_index(items: list) -> np.ndarray:
    return np.array([questions.KINDS.index(q.kind) for _, _, q in items])


def accuracy(correct: np.ndarray, kidx: np.ndarray) -> dict[str, float]:
    """Per kind and overall (mean of the kinds)."""
    out = {k: float(correct[kidx == i].mean()) for i, k in enumerate(questions.KINDS)}
    return out | {"overall": float(np.mean(list(out.values())))}


def _draws(kidx: np.ndarray, seed: int = 0) -> list[np.ndarray]:
    """Per kind: index matrix [N_BOOT, n_k] drawn with replacement inside the kind."""
    rng = np.random.default_rng(seed)
    return [np.flatnonzero(kidx == i)[rng.integers(0, (kidx == i).sum(), (N_BOOT, (kidx == i).sum()))]
            for i in range(len(questions.KINDS))]


def _boot(values: np.ndarray, draws: list[np.ndarray]) -> dict[str, np.ndarray]:
    per = {k: values[d].mean(axis=1) for k, d in zip(questions.KINDS, draws, strict=True)}
    return per | {"overall": np.mean(list(per.values()), axis=0)}


def interval(correct: np.ndarray, kidx: np.ndarray) -> dict[str, float]:
    """The overall accuracy's own 95 % bootstrap interval (kind-stratified)."""
    b = _boot(correct.astype(float), _draws(kidx))["overall"]
    return {"lo": float(np.percentile(b, 2.5)), "hi": float(np.percentile(b, 97.5))}


def paired(a: np.ndarray, b: np.ndarray, kidx: np.ndarray) -> dict[str, dict[str, float]]:
    """a - b per kind and overall: {"diff", "lo", "hi"} (paired 95 % percentile interval)."""
    draws = _draws(kidx)
    ba, bb = _boot(a.astype(float), draws), _boot(b.astype(float), draws)
    pa, pb = accuracy(a, kidx), accuracy(b, kidx)
    return {k: {"diff": pa[k] - pb[k], "lo": float(np.percentile(ba[k] - bb[k], 2.5)),
                "hi": float(np.percentile(ba[k] - bb[k], 97.5))} for k in pa}


def matched_steps(nfe_mean: float, blocks: int) -> int:
    """The official steps nearest a mean forward count, a positive multiple of the blocks."""
    return max(blocks, round(nfe_mean / blocks) * blocks)


def run_rules(pipe, items: list, batch: int) -> dict[str, dict[str, Any]]:
    """Every rule of RULES, then the official order at each faster rule's forwards."""
    runs = {}
    for rule in RULES:
        runs[rule] = answer_all(pipe, items, rule, None, batch)
        print(f"{rule:16s} nfe {runs[rule]['nfe_mean']:6.2f} correct "
              f"{np.mean(runs[rule]['correct']):.3f}", flush=True)
    official = runs["official"]
    _, s, q = items[0]
    image = torch.from_numpy(scenes.render(s.objects))[None].float() / 255
    shape = pipe.prepare_understand(image, q.text).shape  # the default answer's shape
    by_steps: dict[int, dict[str, Any]] = {}  # rules at the same rounded forwards share a run
    for rule in RULES[1:]:
        if runs[rule]["nfe_mean"] < official["nfe_mean"]:
            steps = matched_steps(runs[rule]["nfe_mean"], shape.blocks)
            if steps not in by_steps:
                by_steps[steps] = answer_all(pipe, items, "official", steps, batch, shape)
            name = f"official@{rule}"
            runs[name] = by_steps[steps] | {"matches": rule}
            print(f"{name:16s} nfe {runs[name]['nfe_mean']:6.2f} correct "
                  f"{np.mean(runs[name]['correct']):.3f}", flush=True)
    return runs


def summarise(runs: dict[str, dict[str, Any]], kidx: np.ndarray) -> dict[str, Any]:
    """Accuracy per rule, paired comparisons and the pick."""
    c = {n: np.array(r["correct"]) for n, r in runs.items()}
    for n, r in runs.items():
        r["accuracy"] = accuracy(c[n], kidx)
    compare = {n: {"vs_official": paired(c[n], c["official"], kidx)} for n in runs if n != "official"}
    for n in runs:
        if f"official@{n}" in runs:
            compare[n]["vs_official_same_forwards"] = paired(c[n], c[f"official@{n}"], kidx)
    band = interval(c["official"], kidx)
    inside = [n for n, r in runs.items() if n != "official"
              and r["nfe_mean"] < runs["official"]["nfe_mean"]
              and r["accuracy"]["overall"] >= band["lo"]]
    best = min(inside, key=lambda n: runs[n]["nfe_mean"]) if inside else None
    pick = {"official_interval": band, "official_nfe_mean": runs["official"]["nfe_mean"],
            "fastest_within": best,
            "fastest_nfe_mean": runs[best]["nfe_mean"] if best else None,
            "fastest_accuracy": runs[best]["accuracy"]["overall"] if best else None}
    return {"compare": compare, "pick": pick}


def _ci(d: dict[str, float] | None) -> str:
    return "-" if d is None else f"{d['diff']:+.2f} [{d['lo']:+.2f}, {d['hi']:+.2f}]"


def table(doc: dict[str, Any]) -> str:
    """The report's table of the rules (docs/reports/UNDERSTANDING_STUDY.md)."""
    kinds = [*questions.KINDS, "overall"]
    lines = ["| results key | forwards per answer | " + " | ".join(kinds)
             + " | vs official | vs official, same forwards |",
             "|---" * (len(kinds) + 4) + "|"]
    for name, r in doc["rules"].items():
        c = doc["compare"].get(name, {})
        lines.append(f"| `{name}` | {r['nfe_mean']:.1f} | "
                     + " | ".join(f"{r['accuracy'][k]:.2f}" for k in kinds)
                     + f" | {_ci(c.get('vs_official', {}).get('overall'))} | "
                     f"{_ci(c.get('vs_official_same_forwards', {}).get('overall'))} |")
    return "\n".join(lines)


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--per-kind", type=int, default=40, help="test questions per kind")
    ap.add_argument("--batch", type=int, default=40, help="questions per understand() call")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--model", default=str(nano_mmu_model_path()))
    ap.add_argument("--json", default=str(ROOT / "lab" / "results" / "understanding.json"))
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    a = parse(argv)
    torch.set_num_threads(a.threads)
    pipe = load_dimoo(a.model, dtype=torch.float32)
    items = question_set(a.per_kind)
    kidx = kind_index(items)
    runs = run_rules(pipe, items, a.batch)
    summary = summarise(runs, kidx)
    meta = {"model": Path(a.model).name, "per_kind": a.per_kind, "kinds": list(questions.KINDS),
            "temperature": 0.0, "scene_index": [i for i, _, _ in items],
            "questions": [q.text for _, _, q in items],
            "expected": [q.answer for _, _, q in items],
            "command": "python -m lab.studies.understanding " + " ".join(
                sys.argv[1:] if argv is None else argv)}
    out = {"meta": meta, "rules": runs, **summary, "env": env_info()}
    Path(a.json).write_text(json_text(out))
    print(table(out))
    p = summary["pick"]
    print(f"official: nfe {p['official_nfe_mean']:.2f}, interval {p['official_interval']}; "
          f"fastest within: {p['fastest_within']} nfe {p['fastest_nfe_mean']} -> {a.json}")
    return out


if __name__ == "__main__":
    main()
