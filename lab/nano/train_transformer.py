"""Train DiMOO-nano's transformer with the masked-diffusion objective on DiMOO's layout.

Sequence (official ``train/train.py``, text-to-image branch)::

    tokens(<system>SYSTEM</system><user>{caption}</user>) + [BOA, BOI]
      + h rows of (w image tokens + NEWLINE) + [EOI, EOA]

with image token = code + image_token_offset; 10 % of samples use the unconditional prompt
``<user><uncondition></user>`` (classifier-free guidance). Masking follows the official
``mask_codes(sch="cosine")``: r ~ U(0, 1), mask ratio cos(r * pi / 2), at least one code;
only image codes are masked (never newline / BOA / BOI / EOI / EOA), the loss is cross-entropy
on the masked positions, and the model takes no timestep input (LLaDA). Logits are computed on
the codebook rows only (the sampler reads only those). Rows of a batch are left-padded with a
key-padding mask, the same layout the runtime uses, so positions match inference exactly.

The model is `ladr_core.dimoo.model.transformer.LLaDAModel`, so the saved state_dict carries the official
parameter names and `load_dimoo(nano_model_path())` loads it like the real checkpoint.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

from lab.nano.tokenizer import special_ids, t2i_prompts
from ladr_core.dimoo.model.config import DiMOOIds, LLaDAConfig
from ladr_core.dimoo.model.transformer import LLaDAModel

UNCOND_PROB = 0.1


@dataclass(frozen=True)
class TrainConfig:
    d_model: int = 128
    n_layers: int = 6
    n_heads: int = 4
    mlp_hidden_size: int = 384
    steps: int = 16000
    batch: int = 16
    lr: float = 2e-3
    warmup: int = 100
    weight_decay: float = 0.01
    seed: int = 0
    ckpt_every: int = 100
    max_minutes: float = 0.0  # > 0: stop early (wall budget) and save what was reached
    log_every: int = 25


def build_ids(tokenizer, codebook_size: int) -> DiMOOIds:
    """Compact ids: specials from the tokenizer, codebook right after the text vocabulary."""
    sp = special_ids(tokenizer)
    return DiMOOIds(mask=sp["mask_token_id"], newline=sp["newline_token_id"],
                    image_offset=len(tokenizer), boa=sp["boa_token_id"], eoa=sp["eoa_token_id"],
                    boi=sp["boi_token_id"], eoi=sp["eoi_token_id"],
                    uncondition=sp["uncondition_token_id"], codebook_size=codebook_size)


def build_config(cfg: TrainConfig, ids: DiMOOIds, max_len: int, image_size: int) -> dict:
    """Official-style config.json content (LLaDA fields + every DiMOO id key)."""
    vocab = ids.image_offset + ids.codebook_size
    llada = LLaDAConfig(d_model=cfg.d_model, n_heads=cfg.n_heads, n_layers=cfg.n_layers,
                        mlp_hidden_size=cfg.mlp_hidden_size, vocab_size=vocab, embedding_size=vocab,
                        max_sequence_length=max_len, rope_theta=10000.0)
    out = llada.to_dict()
    out.update(ids.to_config_dict())
    out.update({"default_image_size": image_size, "ladr_can_edit": False,
                "ladr_can_understand": False, "pad_token_id": 0,
                "eos_token_id": 0,
                "architectures": ["LLaDAModelLM"], "model_type": "llada"})
    return out


def image_part(codes: torch.Tensor, ids: DiMOOIds) -> torch.Tensor:
    """codes [B, h, w] -> image part [B, 4 + h * (w + 1)] (codes shifted by image_offset)."""
    b, h, w = codes.shape
    nl = torch.full((b, h, 1), ids.newline, dtype=torch.long)
    rows = torch.cat([codes.long() + ids.image_offset, nl], dim=2).reshape(b, -1)
    head = torch.tensor([ids.boa, ids.boi]).expand(b, 2)
    tail = torch.tensor([ids.eoi, ids.eoa]).expand(b, 2)
    return torch.cat([head, rows, tail], dim=1)


def code_positions(h: int, w: int) -> torch.Tensor:
    """Index [h*w] of each code inside the image part (skips BOA, BOI and newlines)."""
    r = torch.arange(h).repeat_interleave(w)
    c = torch.arange(w).repeat(h)
    return 2 + r * (w + 1) + c


def make_batch(prompts: list[list[int]], codes: torch.Tensor, ids: DiMOOIds,
               g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Left-padded masked batch: input_ids [B, L], attention_mask [B, L], masked [B, L] bool,
    targets [B, L] (code index at masked positions)."""
    b, h, w = codes.shape
    n = h * w
    img = image_part(codes, ids)
    ratio = torch.cos(torch.rand(b, generator=g) * math.pi / 2)
    n_mask = (ratio * n).long().clamp(min=1)
    order = torch.rand(b, n, generator=g).argsort(dim=1)
    code_mask = torch.zeros(b, n, dtype=torch.bool)
    code_mask[order < n_mask[:, None]] = True  # a uniformly random subset of size n_mask
    pos = code_positions(h, w)
    img_mask = torch.zeros_like(img, dtype=torch.bool)
    img_mask[:, pos] = code_mask
    targets = torch.zeros_like(img)
    targets[:, pos] = codes.reshape(b, n).long()
    img = img.masked_fill(img_mask, ids.mask)
    p_len = max(len(p) for p in prompts)
    pad = torch.zeros(b, p_len, dtype=torch.long)
    att = torch.zeros(b, p_len + img.shape[1], dtype=torch.long)
    for i, p in enumerate(prompts):
        pad[i, p_len - len(p):] = torch.tensor(p)
        att[i, p_len - len(p):] = 1
    z = torch.zeros(b, p_len, dtype=torch.bool)
    return (torch.cat([pad, img], 1), att, torch.cat([z, img_mask], 1),
            torch.cat([z.long(), targets], 1))


def masked_loss(model: LLaDAModel, batch: tuple, ids: DiMOOIds) -> torch.Tensor:
    """Mean cross-entropy over masked code positions (codebook rows of the logits)."""
    input_ids, att, masked, targets = batch
    hidden, _ = model.hidden_states(input_ids, att)
    rows = slice(ids.image_offset, ids.image_offset + ids.codebook_size)
    logits = model.project(hidden[masked], rows)
    return F.cross_entropy(logits.float(), targets[masked])


def _lr(step: int, cfg: TrainConfig, elapsed_s: float = 0.0) -> float:
    """Linear warm-up, then cosine to 0.1 x lr. With a wall budget (max_minutes > 0) progress is
    max(step fraction, time fraction), so the schedule anneals by the deadline on a busy machine
    (the run is then reproducible only up to where the budget cut it)."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    t = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    if cfg.max_minutes > 0:
        t = max(t, elapsed_s / (cfg.max_minutes * 60))
    t = min(t, 1.0)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


def train(data: dict, tokenizer, cfg: TrainConfig, runs: Path, resume: bool = True,
          vq_factor: int = 4) -> tuple[LLaDAModel, dict, dict]:
    """Masked-diffusion training loop with periodic checkpoints in `runs` (resumable)."""
    codes: torch.Tensor = data["codes"]
    k = int(data["codebook_size"])
    ids = build_ids(tokenizer, k)
    enc = {c: tokenizer(t2i_prompts(c)[0])["input_ids"] for c in sorted(set(data["captions"]))}
    uncond = tokenizer(t2i_prompts("")[1])["input_ids"]
    prompt_ids = [enc[c] for c in data["captions"]]
    max_len = max(len(p) for p in enc.values()) + image_part(codes[:1], ids).shape[1]
    # context with headroom for longer prompts / larger grids (RoPE: no position table to learn)
    config = build_config(cfg, ids, 2 ** math.ceil(math.log2(2 * max_len)), codes.shape[1] * vq_factor)
    torch.manual_seed(cfg.seed)
    model = LLaDAModel.from_config(config)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.95),
                            weight_decay=cfg.weight_decay)
    g = torch.Generator().manual_seed(cfg.seed)
    start, history, elapsed_before = 0, [], 0.0
    ckpt = runs / "transformer_ckpt.pt"
    if resume and ckpt.is_file():
        state = torch.load(ckpt, weights_only=False)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        g.set_state(state["gen"])
        start, history = state["step"], state["history"]
        elapsed_before = state.get("elapsed_s", 0.0)
        print(f"resumed at step {start}", flush=True)
    t0, ema = time.time(), None
    for step in range(start, cfg.steps):
        idx = torch.randint(len(codes), (cfg.batch,), generator=g)
        drop = torch.rand(cfg.batch, generator=g) < UNCOND_PROB
        prompts = [uncond if d else prompt_ids[i] for i, d in zip(idx.tolist(), drop.tolist(), strict=True)]
        batch = make_batch(prompts, codes[idx], ids, g)
        for gr in opt.param_groups:
            gr["lr"] = _lr(step, cfg, time.time() - t0 + elapsed_before)
        loss = masked_loss(model, batch, ids)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
        if step % cfg.log_every == 0 or step == cfg.steps - 1:
            rate = (step + 1 - start) * cfg.batch / (time.time() - t0)
            history.append({"step": step, "loss": round(ema, 4), "samples_per_s": round(rate, 2),
                            "lr": round(opt.param_groups[0]["lr"], 6)})
            print(history[-1], flush=True)
        elapsed = time.time() - t0 + elapsed_before
        stop = cfg.max_minutes > 0 and elapsed > cfg.max_minutes * 60
        if (step + 1) % cfg.ckpt_every == 0 or step == cfg.steps - 1 or stop:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "gen": g.get_state(),
                        "step": step + 1, "history": history, "elapsed_s": elapsed},
                       ckpt.with_suffix(".tmp"))
            os.replace(ckpt.with_suffix(".tmp"), ckpt)  # a run killed mid-write keeps the last one
        if stop:
            print(f"stopped at step {step + 1} (max_minutes {cfg.max_minutes})", flush=True)
            break
    return model, config, {"history": history, "final_loss_ema": ema, "config": cfg.__dict__}


def save_model(model: LLaDAModel, config: dict, out: Path, dtype: torch.dtype = torch.float32) -> None:
    """config.json + model.safetensors (official key names) into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().to(dtype).contiguous() for k, v in model.state_dict().items()}
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")


def stage_transformer(out: Path, runs: Path, cfg: TrainConfig | None = None) -> None:
    """Train on runs/codes.pt and write config.json + model.safetensors into `out`."""
    from transformers import PreTrainedTokenizerFast

    cfg = cfg or TrainConfig()
    data = torch.load(runs / "codes.pt", weights_only=False)
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(out / "tokenizer.json"))
    vq_cfg = json.loads((out / "vqvae" / "config.json").read_text())
    data["codebook_size"] = vq_cfg["num_vq_embeddings"]
    factor = 2 ** (len(vq_cfg["block_out_channels"]) - 1)
    t0 = time.time()
    model, config, stats = train(data, tokenizer, cfg, runs, vq_factor=factor)
    stats["train_s"] = round(time.time() - t0, 1)
    save_model(model, config, out)
    (runs / "transformer_stats.json").write_text(json.dumps(stats, indent=1))
    print("transformer saved", out, stats["final_loss_ema"], stats["train_s"])
