"""The official understanding path, transcribed once: the parity tests compare with it.

`official_sequence` follows Alpha-VLLM/Lumina-DiMOO inference/inference_mmu.py (the prompt of
utils/prompt_utils.generate_multimodal_understanding_prompt, the image tokens of
utils/image_utils.encode_img_with_breaks inserted before the text's last token, then
<answer>, gen_length MASK, </answer>) and `official_answer` follows
generators/text_understanding_generator.generate_text_understanding step by step (cfg 0,
remasking 'low_confidence'), written with the official host logic: whole-sequence logits from
the plain (unpacked) forward, `get_num_transfer_tokens`, float64 Gumbel division, -inf past the
block, per-row `torch.topk`, the `.item()` stop after each block.

Adaptations (each said where it happens): the image is laid out once (inference_mmu.py's second
`add_break_line` truncates it); the stop slice names variables the official code never defines
(`input_p_len`, `rows`), so it cuts, as intended, after the block holding the end token, and it
reads the answer rather than the whole sequence; the noise comes from an explicit generator for
the answer's rows up to the end of the current block [n, V] (the official code draws [L, V] from
the global one; the other rows' draws decide nothing: before the answer nothing is masked, past
the block the confidence is -inf).
"""

from __future__ import annotations

import torch

SYSTEM = ("You are a multimodal model that can process both text and images. Answer the "
          "following question based on the provided images. Analyze each image and combine "
          "relevant details to answer.")


def add_break_line(sequence: list[int], h: int, w: int, newline: int) -> list[int]:
    out: list[int] = []
    for i in range(h):
        out.extend(sequence[i * w:(i + 1) * w] + [newline])
    return out


def official_sequence(encode, ids, question: str, codes: torch.Tensor, h: int, w: int,
                      gen_length: int) -> tuple[torch.Tensor, int]:
    """(input ids [1, L], code_start) of inference_mmu.py for VQ codes [h*w]."""
    input_ids = encode("<system>" + SYSTEM + "</system>" + "<user>" + question + "</user>")
    image = [ids.boi] + add_break_line((codes + ids.image_offset).tolist(), h, w,
                                       ids.newline) + [ids.eoi]
    tokens = input_ids[:-1] + image + input_ids[-1:]
    code_start = len(tokens) + 1
    tokens = tokens + [ids.boa] + gen_length * [ids.mask] + [ids.eoa]
    return torch.tensor(tokens).unsqueeze(0), code_start


def get_num_transfer_tokens(mask_index: torch.Tensor, steps: int) -> torch.Tensor:
    mask_num = mask_index.sum(dim=1, keepdim=True)
    base = mask_num // steps
    remainder = mask_num % steps
    num = torch.zeros(mask_num.size(0), steps, dtype=torch.int64) + base
    for i in range(mask_num.size(0)):
        num[i, :remainder[i]] += 1
    return num


def official_answer(model, prompt: torch.Tensor, steps: int, gen_length: int,
                    block_length: int, temperature: float, mask_id: int, code_start: int,
                    end_id: int | None, generator: torch.Generator | None
                    ) -> tuple[torch.Tensor, int]:
    """(x [1, L'] as the official function returns it, forward passes made)."""
    x = prompt.clone()
    num_blocks = gen_length // block_length
    steps = steps // num_blocks
    nfe = 0
    for num_block in range(num_blocks):
        lo, hi = code_start + num_block * block_length, code_start + (num_block + 1) * block_length
        num_transfer = get_num_transfer_tokens(x[:, lo:hi] == mask_id, steps)
        for i in range(steps):
            mask_index = x == mask_id
            with torch.no_grad():
                logits = model(x)
            nfe += 1
            x0 = torch.argmax(logits, dim=-1)
            if temperature != 0:  # adaptation: the answer's rows so far draw, from `generator`
                rows = logits[:, code_start:hi].to(torch.float64)
                noise = torch.rand(rows.shape[1:], generator=generator, dtype=torch.float64)
                x0[:, code_start:hi] = torch.argmax(
                    rows.exp() / (-torch.log(noise)) ** temperature, dim=-1)
            p = torch.softmax(logits.to(torch.float64), dim=-1)
            x0_p = torch.gather(p, -1, x0.unsqueeze(-1)).squeeze(-1)
            x0_p[:, hi:] = -float("inf")
            x0 = torch.where(mask_index, x0, x)
            confidence = torch.where(mask_index, x0_p, -float("inf"))
            transfer = torch.zeros_like(x0, dtype=torch.bool)
            for j in range(confidence.shape[0]):
                _, select = torch.topk(confidence[j], k=int(num_transfer[j, i]))
                transfer[j, select] = True
            x[transfer] = x0[transfer]
        if end_id is not None and (x[:, code_start:hi] == end_id).sum().item() > 0:
            return x[:, :hi], nfe  # the official stop, as intended
    return x, nfe
