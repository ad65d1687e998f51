"""The emoji transformer stage: lab.nano's trainer on learned codes, in the official DiMOO
layout that the pack's loader reads, resumable."""

from __future__ import annotations

import numpy as np
import torch

from lab.emoji import scenes as S
from lab.emoji import train as T
from lab.emoji import vq as V
from ladr_core.dimoo import load_dimoo


def _codes_and_vq(disc_bank, monkeypatch) -> None:
    monkeypatch.setattr(V, "VQ_CONFIG", {**V.VQ_CONFIG, "block_out_channels": (8, 8, 8),
                                         "num_vq_embeddings": 16, "latent_channels": 4,
                                         "norm_num_groups": 4})
    vq = V.build_vq()
    V.save_vq(vq, T.model_dir() / "vqvae")
    images, scenes = S.make_dataset(disc_bank, 8, 0)
    torch.save({"codes": V.encode(vq, images).to(torch.int16),
                "captions": [s.caption for s in scenes]}, T.runs_dir() / "codes.pt")


def test_transformer_stage_writes_a_checkpoint_the_pack_loads_and_resumes(
        emoji_cache, disc_bank, monkeypatch, capsys):
    torch.set_num_threads(1)
    _codes_and_vq(disc_bank, monkeypatch)
    T.stage_transformer(steps=2, ckpt_every=1)
    T.stage_transformer(steps=3, ckpt_every=1)
    assert "resumed at step 2" in capsys.readouterr().out
    state = torch.load(T.runs_dir() / "transformer_ckpt.pt", weights_only=False)
    assert state["step"] == 3
    pipe = load_dimoo(T.model_dir(), dtype=torch.float32)
    words = set(pipe.tokenizer.get_vocab())
    assert set(S.vocabulary_words()) <= words        # every caption word is one token
    res = pipe.generate("a red heart", steps=2, seed=0, strategy="baseline")
    img = np.asarray(res.images[0])
    assert img.shape[:2] == (S.CANVAS, S.CANVAS)
    curve = T.stage_curve(emoji_cache / "curve.json")
    assert curve["transformer"]["step"] == 3 and "vq" not in curve
    codes = torch.load(T.runs_dir() / "codes.pt", weights_only=False)["codes"]
    assert curve["codes"]["distinct_codes"] == int(codes.unique().numel())
    steps = [h["step"] for h in curve["transformer"]["history"]]
    assert steps[0] == 0 and steps[-1] == 2 and steps == sorted(set(steps))
