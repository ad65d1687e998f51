"""The emoji model's training stages, each resumable; everything trained stays in the cache.

Layout (the official DiMOO one, as ladr_core/assets/dimoo_nano): ``cache/model/`` holds the
LLaDA-style transformer (config.json, model.safetensors, tokenizer files) and ``vqvae/`` the
diffusers VQModel; ``cache/runs/`` holds checkpoints, encoded codes and logs. The transformer is
trained by lab.nano's trainer (`lab.nano.train_transformer.train`: the official sequence
layout, cosine masking, 10 % unconditional prompts, checkpoint and resume), on the codes the
learned VQ's encoder gives the training scenes.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import numpy as np
import torch

from lab.emoji.bank import load_bank
from lab.emoji.judge import Judge
from lab.emoji.judge_eval import judge_dir, score, test_scenes
from lab.emoji.packages import cache_dir
from lab.emoji.results import provenance
from lab.emoji.scenes import MODEL_STYLES, TEST_STYLE, make_dataset, render, vocabulary_words
from lab.emoji.vq import VQTrainConfig, encode, round_trip, save_vq, train_vq

ROOT = Path(__file__).resolve().parents[2]
VQ_SCENES, VQ_SEED = 8000, 1
TRAIN_SCENES, TRAIN_SEED = 20000, 2


def model_dir() -> Path:
    return cache_dir() / "model"


def runs_dir() -> Path:
    path = cache_dir() / "runs"
    path.mkdir(parents=True, exist_ok=True)
    return path


def stage_vq(cfg: VQTrainConfig, styles: tuple[str, ...] = MODEL_STYLES) -> None:
    """The VQ on training-split scenes drawn in `styles` (default: the model's two styles)."""
    images, _ = make_dataset(load_bank(), VQ_SCENES, VQ_SEED, "train", styles=styles)
    vq, history = train_vq(images, cfg, runs_dir())
    save_vq(vq, model_dir() / "vqvae")
    (runs_dir() / "vq_history.json").write_text(json.dumps(history, indent=1) + "\n")
    (runs_dir() / "vq_styles.json").write_text(json.dumps(list(styles)) + "\n")
    print("vq saved", model_dir() / "vqvae", flush=True)


def load_vq():
    from diffusers import VQModel

    return VQModel.from_pretrained(str(model_dir() / "vqvae")).eval()


def stage_vq_score(per_category: int, results: str = "emoji_vq.json") -> dict:
    """The judge on VQ round trips of ground-truth test scenes (the ceiling of any sampler)."""
    bank, judge, vq = load_bank(), Judge.load(judge_dir()), load_vq()
    scenes = test_scenes(per_category, seed=7)
    out = {**provenance(), "cache": str(cache_dir()),
           "command": f"python -m lab.emoji.build vq-score --scenes {per_category} --results {results}",
           "vq_config": {k: v for k, v in vq.config.items() if not k.startswith("_")},
           "history": json.loads((runs_dir() / "vq_history.json").read_text())[-1]}
    for style in (*MODEL_STYLES, TEST_STYLE):
        real = np.stack([render(bank, style, sc.placed) for sc in scenes])
        rec = round_trip(vq, real)
        out[style] = {"ground_truth": score(judge, bank, style, scenes),
                      "round_trip": _score_images(judge, scenes, rec),
                      "mean_abs_error": round(float(np.abs(rec / 255.0 - real / 255.0).mean()), 5),
                      "frechet_round_trip_vs_real": round(_frechet(judge, rec, real), 3)}
    styles = runs_dir() / "vq_styles.json"
    out["vq_trained_on"] = json.loads(styles.read_text()) if styles.is_file() else list(MODEL_STYLES)
    path = ROOT / "lab" / "results" / results
    path.write_text(json.dumps(out, indent=1) + "\n")
    return out


def _frechet(judge: Judge, a: np.ndarray, b: np.ndarray) -> float:
    from lab.emoji.judge import frechet_distance

    return frechet_distance(judge.features(a), judge.features(b))


def _score_images(judge: Judge, scenes, images: np.ndarray) -> dict:
    from collections import defaultdict

    from lab.emoji.judge import prompt_passes

    passed = defaultdict(list)
    for sc, img in zip(scenes, images, strict=True):
        passed[sc.spec.category].append(prompt_passes(sc.spec, judge.read(img)))
    rates = {c: round(float(np.mean(v)), 4) for c, v in passed.items()}
    rates["mean"] = round(float(np.mean([x for v in passed.values() for x in v])), 4)
    return rates


def stage_codes() -> None:
    """Training scenes (Noto + Twemoji) -> codes by the learned encoder -> runs/codes.pt."""
    images, scenes = make_dataset(load_bank(), TRAIN_SCENES, TRAIN_SEED, "train")
    t0 = time.time()
    codes = encode(load_vq(), images)
    torch.save({"codes": codes.to(torch.int16), "captions": [s.caption for s in scenes],
                "categories": [s.spec.category for s in scenes]}, runs_dir() / "codes.pt")
    print(f"codes {tuple(codes.shape)} in {time.time() - t0:.0f}s, "
          f"{int(codes.unique().numel())} distinct", flush=True)


def stage_transformer(steps: int, ckpt_every: int = 50) -> None:
    """lab.nano's trainer on runs/codes.pt; resumes from runs/transformer_ckpt.pt. The learning
    rate follows the step count alone (no wall budget: nano's would anneal within one call),
    so a run killed at any point and resumed trains as one uninterrupted run, less at most
    `ckpt_every` steps redone."""
    from lab.nano.tokenizer import save_tokenizer
    from lab.nano.train_transformer import TrainConfig, save_model, train

    out = model_dir()
    tokenizer = save_tokenizer(out, extra_words=vocabulary_words())
    data = torch.load(runs_dir() / "codes.pt", weights_only=False)
    data["codebook_size"] = json.loads((out / "vqvae" / "config.json").read_text())["num_vq_embeddings"]
    cfg = dataclasses.replace(TrainConfig(), steps=steps, ckpt_every=ckpt_every)
    t0 = time.time()
    model, config, stats = train(data, tokenizer, cfg, runs_dir(), resume=True)
    config["ladr_testbed"] = "emoji"   # guidance: tuned on validation prompts later, not set here
    save_model(model, config, out)
    stats["train_s_this_call"] = round(time.time() - t0, 1)
    (runs_dir() / "transformer_stats.json").write_text(json.dumps(stats, indent=1) + "\n")
    print("transformer saved", out, flush=True)


def stage_curve(path: Path | None = None) -> dict:
    """The learning curves so far (VQ and transformer checkpoints) -> lab/results/emoji_training.json."""
    out = {**provenance(), "command": "python -m lab.emoji.build curve"}
    for name in ("vq", "transformer"):
        ckpt = runs_dir() / f"{name}_ckpt.pt"
        if ckpt.is_file():
            state = torch.load(ckpt, weights_only=False, map_location="cpu")
            out[name] = {"step": state["step"], "history": state["history"],
                         "train_s": round(state.get("s", state.get("elapsed_s", 0.0)), 1)}
    codes = runs_dir() / "codes.pt"
    if codes.is_file():
        data = torch.load(codes, weights_only=False)
        out["codes"] = {"scenes": len(data["captions"]), "grid": list(data["codes"].shape[1:]),
                        "distinct_codes": int(data["codes"].unique().numel())}
    path = path or ROOT / "lab" / "results" / "emoji_training.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    return out


def export_checkpoint(ckpt: Path, out: Path, source: Path | None = None) -> dict:
    """A training checkpoint (``runs/transformer_ckpt.pt``, read only: it is copied first) ->
    a loadable model folder `out` (config.json, model.safetensors, the tokenizer files and
    ``vqvae/`` of `source`, default the cache's model folder). The config is the one the trainer
    builds (lab.nano's `train` resumed at the checkpoint's own step runs no step). Returns
    {"step", "loss", "history"} of the checkpoint."""
    import shutil
    import tempfile

    from transformers import PreTrainedTokenizerFast

    from lab.nano.train_transformer import TrainConfig, save_model, train

    source = source or model_dir()
    out.mkdir(parents=True, exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy2(source / name, out / name)
    shutil.copytree(source / "vqvae", out / "vqvae", dirs_exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="emoji_export_") as tmp:
        shutil.copy2(ckpt, Path(tmp) / "transformer_ckpt.pt")
        step = int(torch.load(Path(tmp) / "transformer_ckpt.pt", weights_only=False,
                              map_location="cpu")["step"])
        data = torch.load(ckpt.parent / "codes.pt", weights_only=False)
        data["codebook_size"] = json.loads((source / "vqvae" / "config.json").read_text())[
            "num_vq_embeddings"]
        tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(out / "tokenizer.json"))
        cfg = dataclasses.replace(TrainConfig(), steps=step)
        model, config, stats = train(data, tokenizer, cfg, Path(tmp), resume=True)
    config["ladr_testbed"] = "emoji"
    save_model(model, config, out)
    history = stats["history"]
    return {"step": step, "loss": history[-1]["loss"] if history else None, "history": history}
