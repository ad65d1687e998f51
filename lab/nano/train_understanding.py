"""Teach a sibling of the shipped DiMOO-nano to answer: ``python -m lab.nano.train_understanding``.

The shipped nano (ladr_core/assets/dimoo_nano) only draws and stays as it is. Its sibling
(`nano_mmu_model_path()`) starts from its weights:

1. Vocabulary. The words of the official understanding system prompt, the questions and the
   answers (lab.nano.questions) are appended to the shipped words, BEFORE the image codes: every
   text id keeps its value, the codes move up to the new offset (still the last
   ``codebook_size`` rows), and the embedding and output rows are copied to their new places.
   The sampler reads only the codebook rows, so at step 0 the sibling draws exactly as the
   shipped nano. New words start at the mean of the shipped text embeddings (+ N(0, 0.02)) and
   with N(0, 0.02) output rows.
2. Understanding examples, in the official layout (``inference/inference_mmu.py``): the tokens
   of ``<system>{understanding system prompt}</system><user>{question}</user>`` with the image
   ``[BOI] + h rows of (w codes + NEWLINE) + [EOI]`` inserted before the last token, then
   ``[BOA] + answer + <|endoftext|> padding to the answer length + [EOA]``. The image codes are
   the VQ encoder's (the pipeline's ``encode_image``, what a user's picture becomes). The answer
   is masked LLaDA-style (ratio t ~ U(0.05, 1) per row; a quarter of the rows also mask every
   token after a random point, as block-wise decoding leaves them), and the loss is the
   cross-entropy over the whole vocabulary on the masked answer tokens (padding weighted
   `pad_weight` per token, or with `pad_share` all masked padding of a batch weighs that share of
   its masked words: per token, a few answer words padded to 256 tokens are otherwise learnt as
   padding; stage 3 on). Answer lengths vary (`answer_lengths`), half of the rows at 256 tokens: the
   context stays the shipped 512 tokens, so `understand()`'s default answer on the sibling is
   the one 256-token block the context holds beside the question and the 12 x 12 image.
3. The original text-to-image data in the same step (first `t2i_scenes` scenes of the shipped
   training set, canonical codes, `lab.nano.train_transformer.make_batch`), so drawing is kept.

Everything is seeded (torch and numpy generators). Scratch files go to runs/nano_mmu/; the
training record to lab/results/nano_mmu_training.json.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import save_file

from lab.nano import questions, scenes
from lab.nano.tokenizer import (
    UNDERSTANDING_SYSTEM_PROMPT,
    build_tokenizer,
    save_tokenizer,
    split_words,
    t2i_prompts,
)
from lab.nano.train_transformer import UNCOND_PROB, build_ids, make_batch, masked_loss
from lab.nano.vq import CodeTable, build_code_table
from ladr_core import load_dimoo, nano_mmu_model_path, nano_model_path
from ladr_core.dimoo.model.config import DiMOOIds
from ladr_core.dimoo.model.transformer import LLaDAModel
from ladr_core.dimoo.weights.vqfiles import SHARED_VQ_KEY

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "runs" / "nano_mmu"
RECORD = ROOT / "lab" / "results" / "nano_mmu_training.json"
VQ_SCENES, VQ_SEED = 4000, 1          # the shipped vq stage's scenes (lab.nano.train_all)
T2I_SEED = 2                          # the shipped transformer's training scenes


@dataclass(frozen=True)
class FinetuneConfig:
    steps: int = 600
    batch: int = 8                    # understanding rows per step
    draw_batch: int = 8               # drawing rows per step
    lr: float = 1e-3
    warmup: int = 30
    weight_decay: float = 0.01
    seed: int = 0
    mmu_scenes: int = 3000
    mmu_seed: int = 3                 # training scenes of their own (test: lab.nano.questions)
    questions_per_kind: int = 2
    t2i_scenes: int = 6000
    answer_lengths: tuple[int, ...] = (64, 128, 256, 256)
    pad_weight: float = 0.25
    pad_share: float = 0.0            # > 0: masked padding weighs this share of the masked words
    tail_mask_prob: float = 0.25
    balance: bool = False             # answer rows: uniform over each kind's distinct answers
    max_minutes: float = 0.0          # > 0: anneal by then and stop there
    log_every: int = 25


def understanding_words() -> list[str]:
    """Words the sibling adds: the system prompt's, the questions' and the answers'."""
    shipped = set(build_tokenizer().get_vocab())
    new = set(split_words(UNDERSTANDING_SYSTEM_PROMPT)) | set(questions.words())
    return sorted(new - shipped)


def understanding_text(question: str) -> str:
    """Official ``generate_multimodal_understanding_prompt``."""
    return f"<system>{UNDERSTANDING_SYSTEM_PROMPT}</system><user>{question}</user>"


def image_rows(codes: torch.Tensor, ids: DiMOOIds) -> list[int]:
    """codes [h, w] -> [BOI] + h rows of (w image tokens + NEWLINE) + [EOI]."""
    rows = torch.cat([codes.long() + ids.image_offset,
                      torch.full((codes.shape[0], 1), ids.newline)], dim=1)
    return [ids.boi, *rows.reshape(-1).tolist(), ids.eoi]


def mmu_prompt(question_ids: list[int], codes: torch.Tensor, ids: DiMOOIds) -> list[int]:
    """The question's tokens with the image inserted before the last one (official order)."""
    return question_ids[:-1] + image_rows(codes, ids) + question_ids[-1:]


def widen(model: LLaDAModel, config: dict, old: DiMOOIds, new: DiMOOIds,
          g: torch.Generator) -> LLaDAModel:
    """The shipped model with text rows [old.image_offset, new.image_offset) inserted."""
    k = old.codebook_size
    vocab = new.image_offset + k
    cfg = {**config, "vocab_size": vocab, "embedding_size": vocab,
           "image_token_offset": new.image_offset}
    out = LLaDAModel.from_config(cfg)
    state = model.state_dict()
    added = new.image_offset - old.image_offset
    for key in ("model.transformer.wte.weight", "model.transformer.ff_out.weight"):
        w = state[key]
        text, codes = w[:old.image_offset], w[old.image_offset:]
        noise = torch.randn(added, w.shape[1], generator=g) * 0.02
        fresh = text.mean(0) + noise if key.endswith("wte.weight") else noise
        state[key] = torch.cat([text, fresh.to(w.dtype), codes])
    out.load_state_dict(state, strict=True)
    return out


def encoder_codes(pipe, images: np.ndarray, chunk: int = 256) -> torch.Tensor:
    """uint8 images [N, S, S, 3] -> the pipeline's VQ encoder codes [N, h, w]."""
    h = images.shape[1] // pipe.vq_factor
    parts = [pipe.encode_image(torch.from_numpy(images[i:i + chunk]).float() / 255)
             for i in range(0, len(images), chunk)]
    return torch.cat(parts).view(-1, h, images.shape[2] // pipe.vq_factor)


def mmu_examples(cfg: FinetuneConfig, tokenizer) -> dict[str, list[tuple[int, list[int], list[int]]]]:
    """kind -> [(scene index, question ids, answer ids)] over the training scenes."""
    rng = np.random.default_rng(cfg.mmu_seed)
    sc = [scenes.make_scene(rng) for _ in range(cfg.mmu_scenes)]
    out: dict[str, list] = {k: [] for k in questions.KINDS}
    for i, scene in enumerate(sc):
        for kind in questions.KINDS:
            seen = set()
            for _ in range(cfg.questions_per_kind):
                q = questions.ask(scene, kind, rng)
                if q is None or q.text in seen:
                    continue
                seen.add(q.text)
                out[kind].append((i, tokenizer(understanding_text(q.text))["input_ids"],
                                  tokenizer(q.answer)["input_ids"]))
    return out | {"_scenes": sc}  # type: ignore[return-value]


def mmu_batch(rows: list[tuple[list[int], list[int]]], length: int, ids: DiMOOIds, eos: int,
              cfg: FinetuneConfig, g: torch.Generator) -> tuple[torch.Tensor, ...]:
    """(prompt ids, answer ids) rows -> left-padded input_ids, attention mask, masked [B, L]
    bool, targets [B, L], loss weights [B, L]."""
    b = len(rows)
    answers = torch.full((b, length), eos, dtype=torch.long)
    words = torch.zeros(b, length, dtype=torch.bool)
    for r, (_, ans) in enumerate(rows):
        answers[r, :len(ans)] = torch.tensor(ans)
        words[r, :len(ans)] = True
    t = 0.05 + 0.95 * torch.rand(b, 1, generator=g)
    masked = torch.rand(b, length, generator=g) < t
    tail = torch.rand(b, generator=g) < cfg.tail_mask_prob
    cut = (torch.rand(b, generator=g) * length).long()
    masked |= tail[:, None] & (torch.arange(length)[None] >= cut[:, None])
    masked[~masked.any(1), 0] = True
    seq = torch.cat([torch.full((b, 1), ids.boa), answers.masked_fill(masked, ids.mask),
                     torch.full((b, 1), ids.eoa)], 1)
    p_len = max(len(p) for p, _ in rows)
    x = torch.zeros(b, p_len + length + 2, dtype=torch.long)
    att = torch.zeros_like(x)
    for r, (p, _) in enumerate(rows):
        x[r, p_len - len(p):p_len] = torch.tensor(p)
        att[r, p_len - len(p):] = 1
    x[:, p_len:] = seq
    z = torch.zeros(b, p_len + 1, dtype=torch.bool)
    m = torch.cat([z, masked, z[:, :1]], 1)
    tgt = torch.cat([z.long(), answers, z[:, :1].long()], 1)
    w = torch.cat([z.float(), answer_weights(words, masked, cfg), z[:, :1].float()], 1)
    return x, att, m, tgt, w


def answer_weights(words: torch.Tensor, masked: torch.Tensor, cfg: FinetuneConfig) -> torch.Tensor:
    """Loss weights of the answer tokens: 1 for a word; for padding `pad_weight` each, or with
    `pad_share` > 0 the masked padding of the batch weighs `pad_share` times its masked words
    together (a 3-word answer padded to 256 tokens would otherwise be learnt as padding)."""
    if cfg.pad_share <= 0:
        return torch.where(words, 1.0, cfg.pad_weight)
    n_words = (words & masked).sum().clamp(min=1)
    n_pads = (~words & masked).sum().clamp(min=1)
    return torch.where(words, 1.0, cfg.pad_share * n_words / n_pads)


def mmu_loss(model: LLaDAModel, batch: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, float]:
    """Weighted cross-entropy over the whole vocabulary on the masked answer tokens, and the
    plain mean over the masked words alone (what the answers' content costs, for the log)."""
    x, att, m, tgt, w = batch
    hidden, _ = model.hidden_states(x, att)
    ce = F.cross_entropy(model.project(hidden[m]).float(), tgt[m], reduction="none")
    is_word = w[m] == 1.0
    word = float(ce.detach()[is_word].mean()) if is_word.any() else float("nan")
    return (ce * w[m]).sum() / w[m].sum(), word


def lr_at(step: int, cfg: FinetuneConfig, elapsed_s: float) -> float:
    """Linear warm-up, cosine to 0.1 x lr (by the wall budget when one is set)."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    t = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    if cfg.max_minutes > 0:
        t = max(t, elapsed_s / (cfg.max_minutes * 60))
    return cfg.lr * (0.1 + 0.45 * (1 + math.cos(math.pi * min(t, 1.0))))


@dataclass
class Data:
    """What one step draws from: drawing prompts and canonical codes, understanding examples
    and the encoder codes of their scenes."""

    t2i_prompts: list[list[int]]
    t2i_codes: torch.Tensor
    uncond: list[int]
    examples: dict[str, list[tuple[int, list[int], list[int]]]]
    mmu_codes: torch.Tensor

    def __post_init__(self) -> None:
        self.groups = {k: by_answer(pool) for k, pool in self.examples.items()}


def code_table(pipe) -> CodeTable:
    """The shipped vq stage's canonical code table, rebuilt: decoder-only fine-tunes leave the
    encoder and codebook as they were, so the same scenes give the same table."""
    path = RUNS / "code_table.pt"
    if path.is_file():
        return CodeTable.load(path)
    images, _ = scenes.make_dataset(VQ_SCENES, VQ_SEED)
    table, _ = build_code_table(pipe.vq, np.concatenate([images, scenes.part_catalogue()]))
    RUNS.mkdir(parents=True, exist_ok=True)
    table.save(path)
    return table


def load_data(pipe, tokenizer, cfg: FinetuneConfig) -> Data:
    images, sc = scenes.make_dataset(cfg.t2i_scenes, T2I_SEED)
    codes = code_table(pipe).lookup(images)
    enc = {c: tokenizer(t2i_prompts(c)[0])["input_ids"] for c in sorted({s.caption for s in sc})}
    examples = mmu_examples(cfg, tokenizer)
    mmu_scenes = examples.pop("_scenes")
    mmu_images = np.stack([scenes.render(s.objects) for s in mmu_scenes])
    return Data([enc[s.caption] for s in sc], codes, tokenizer(t2i_prompts("")[1])["input_ids"],
                examples, encoder_codes(pipe, mmu_images))


def draw_step(data: Data, ids: DiMOOIds, cfg: FinetuneConfig, g: torch.Generator) -> tuple:
    """One drawing batch, as the shipped training drew it (10 % unconditional)."""
    idx = torch.randint(len(data.t2i_codes), (cfg.draw_batch,), generator=g)
    drop = torch.rand(cfg.draw_batch, generator=g) < UNCOND_PROB
    prompts = [data.uncond if d else data.t2i_prompts[i]
               for i, d in zip(idx.tolist(), drop.tolist(), strict=True)]
    return make_batch(prompts, data.t2i_codes[idx], ids, g)


def by_answer(pool: list[tuple[int, list[int], list[int]]]) -> list[list[int]]:
    """A kind's example indices grouped by answer (groups in first-seen order)."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, (_, _, a_ids) in enumerate(pool):
        groups.setdefault(tuple(a_ids), []).append(i)
    return list(groups.values())


def answer_step(data: Data, ids: DiMOOIds, eos: int, cfg: FinetuneConfig,
                g: torch.Generator) -> tuple:
    """One understanding batch: kinds uniform (with `balance`, then each kind's answers
    uniform), one answer length for the batch."""
    kinds = torch.randint(len(questions.KINDS), (cfg.batch,), generator=g).tolist()
    rows = []
    for k in kinds:
        pool = data.examples[questions.KINDS[k]]
        picks = range(len(pool))
        if cfg.balance:
            groups = data.groups[questions.KINDS[k]]
            picks = groups[int(torch.randint(len(groups), (1,), generator=g))]
        scene, q_ids, a_ids = pool[picks[int(torch.randint(len(picks), (1,), generator=g))]]
        rows.append((mmu_prompt(q_ids, data.mmu_codes[scene], ids), a_ids))
    length = cfg.answer_lengths[int(torch.randint(len(cfg.answer_lengths), (1,), generator=g))]
    return mmu_batch(rows, length, ids, eos, cfg, g)


def finetune(model: LLaDAModel, data: Data, ids: DiMOOIds, eos: int,
             cfg: FinetuneConfig) -> dict:
    """AdamW on the sum of the drawing and the answering loss; returns the record."""
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.95),
                            weight_decay=cfg.weight_decay)
    g = torch.Generator().manual_seed(cfg.seed)
    t0, ema, history = time.time(), None, []
    model.train()
    for step in range(cfg.steps):
        for gr in opt.param_groups:
            gr["lr"] = lr_at(step, cfg, time.time() - t0)
        draw = masked_loss(model, draw_step(data, ids, cfg, g), ids)
        answer, word = mmu_loss(model, answer_step(data, ids, eos, cfg, g))
        opt.zero_grad(set_to_none=True)
        (draw + answer).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        now = torch.tensor([draw.item(), answer.item(), word])
        if ema is not None:  # a batch with no masked word keeps the words' average
            now = torch.where(now.isnan(), ema, now)
        ema = now if ema is None else 0.95 * ema + 0.05 * now
        if step % cfg.log_every == 0 or step == cfg.steps - 1:
            history.append({"step": step, "draw_loss": round(float(ema[0]), 4),
                            "answer_loss": round(float(ema[1]), 4),
                            "word_loss": round(float(ema[2]), 4),
                            "lr": round(opt.param_groups[0]["lr"], 6),
                            "elapsed_s": round(time.time() - t0, 1)})
            print(history[-1], flush=True)
        if cfg.max_minutes > 0 and time.time() - t0 > cfg.max_minutes * 60:
            print(f"stopped at step {step + 1} (max_minutes {cfg.max_minutes})", flush=True)
            break
    model.eval()
    return {"steps_run": step + 1, "train_s": round(time.time() - t0, 1), "history": history}


def save_sibling(model: LLaDAModel, config: dict, words: list[str], out: Path) -> None:
    """The sibling folder: tokenizer, config.json, fp16 weights and the shipped VQ-VAE (beside
    nano: nano's, named in config.json, not a second copy)."""
    out.mkdir(parents=True, exist_ok=True)
    save_tokenizer(out, words)
    (out / "special_tokens_map.json").unlink(missing_ok=True)
    tensors = {k: v.detach().to(torch.float16).contiguous() for k, v in model.state_dict().items()}
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    if out.resolve().parent == nano_model_path().parent:  # the shipped pair: one VQ, stored once
        config = {**config, SHARED_VQ_KEY: f"../{nano_model_path().name}/vqvae"}
    else:
        shutil.copytree(nano_model_path() / "vqvae", out / "vqvae", dirs_exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")


def sibling_config(shipped: dict, ids: DiMOOIds) -> dict:
    vocab = ids.image_offset + ids.codebook_size
    return {**shipped, "vocab_size": vocab, "embedding_size": vocab,
            "image_token_offset": ids.image_offset,
            "ladr_can_edit": False, "ladr_can_understand": True}


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--steps", type=int, default=FinetuneConfig.steps)
    ap.add_argument("--max-minutes", type=float, default=0.0,
                    help="wall budget: anneal by then and stop (0 = run all steps)")
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads")
    ap.add_argument("--lr", type=float, default=FinetuneConfig.lr)
    ap.add_argument("--batch", type=int, default=FinetuneConfig.batch, help="understanding rows")
    ap.add_argument("--draw-batch", type=int, default=FinetuneConfig.draw_batch)
    ap.add_argument("--answer-lengths", default=",".join(map(str, FinetuneConfig.answer_lengths)),
                    help="answer lengths a batch draws from (comma list)")
    ap.add_argument("--mmu-scenes", type=int, default=FinetuneConfig.mmu_scenes,
                    help="training scenes the questions are asked about")
    ap.add_argument("--pad-share", type=float, default=FinetuneConfig.pad_share,
                    help="> 0: the masked padding weighs this share of the masked answer words "
                    "(else pad_weight per token)")
    ap.add_argument("--balance", action="store_true",
                    help="answer rows uniform over each kind's distinct answers")
    ap.add_argument("--resume", action="store_true",
                    help="continue from the last run's float32 weights (runs/nano_mmu/) with a "
                    "fresh schedule, instead of widening the shipped nano")
    ap.add_argument("--seed", type=int, default=FinetuneConfig.seed,
                    help="the step draws' generator (use another one for a resumed stage)")
    ap.add_argument("--out", default=str(nano_mmu_model_path()), help="sibling folder")
    ap.add_argument("--record", default=str(RECORD), help="training record (JSON)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    a = parse(argv)
    torch.set_num_threads(a.threads)
    cfg = FinetuneConfig(steps=a.steps, max_minutes=a.max_minutes, seed=a.seed, lr=a.lr,
                         batch=a.batch, draw_batch=a.draw_batch, balance=a.balance,
                         pad_share=a.pad_share, mmu_scenes=a.mmu_scenes,
                         answer_lengths=tuple(int(x) for x in a.answer_lengths.split(",")))
    t0 = time.time()
    pipe = load_dimoo(nano_model_path(), dtype=torch.float32)
    words = understanding_words()
    tokenizer = build_tokenizer(words)
    old, ids = pipe.ids, build_ids(tokenizer, pipe.ids.codebook_size)
    shipped = json.loads((nano_model_path() / "config.json").read_text())
    config = sibling_config(shipped, ids)
    model = widen(pipe.transformer.float(), shipped, old, ids,
                  torch.Generator().manual_seed(cfg.seed))
    if a.resume:  # the float32 weights of the last run, else its saved (fp16) folder
        scratch = RUNS / "sibling_fp32.pt"
        model.load_state_dict(torch.load(scratch, weights_only=True) if scratch.is_file() else
                              load_dimoo(a.out, dtype=torch.float32).transformer.state_dict())
    data = load_data(pipe, tokenizer, cfg)
    print(f"data ready in {time.time() - t0:.0f}s: {len(words)} new words, image offset "
          f"{old.image_offset} -> {ids.image_offset}", flush=True)
    record = finetune(model, data, ids, tokenizer.eos_token_id, cfg)
    torch.save(model.state_dict(), RUNS / "sibling_fp32.pt")
    save_sibling(model, config, words, Path(a.out))
    from lab.benchmarks.common import env_info, json_text

    prev = json.loads(Path(a.record).read_text()) if a.resume else {}
    stages = prev.get("stages", [])
    if stages:  # the previous stage keeps its config, history and machine
        stages[-1] = {**stages[-1], **{k: prev[k] for k in ("config", "history", "env")
                                       if k in prev}}
    record = {"command": "python -m lab.nano.train_understanding " + " ".join(
        sys.argv[1:] if argv is None else argv), "config": asdict(cfg), "new_words": words,
        "image_offset": [old.image_offset, ids.image_offset], **record,
        "total_s": round(time.time() - t0, 1), "env": env_info()}
    record["stages"] = [*stages, {k: record[k] for k in ("command", "steps_run", "train_s",
                                                          "total_s")}]
    Path(a.record).write_text(json_text(record))
    print(f"saved {a.out} ({record['train_s']} s training)", flush=True)
    return record


if __name__ == "__main__":
    main()
