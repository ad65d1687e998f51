"""Word-level tokenizer for DiMOO-nano, saved as standard Hugging Face tokenizer files.

It carries Lumina-DiMOO's special tokens as single special tokens, so the official prompt
template ``<system>...</system><user>{caption}</user>`` (``utils/prompt_utils.py``) and the
unconditional ``<user><uncondition></user>`` are encoded by the unchanged template path. The
text vocabulary is compact: specials, then the system prompt's and the captions' words. Image
codes follow the text vocabulary (image_token_offset = text vocab size), so the codebook is the
last `codebook_size` rows of the logits, as in the official generator (``vocab_offset =
vocab_total - codebook_size``). No BOS/EOS is added (no post-processor).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from tokenizers import AddedToken, Tokenizer, models, normalizers, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from lab.nano.scenes import vocabulary_words

SYSTEM_PROMPT = "Generate an image according to the text prompt."
UNDERSTANDING_SYSTEM_PROMPT = (
    "You are a multimodal model that can process both text and images. Answer the following "
    "question based on the provided images. Analyze each image and combine relevant details to "
    "answer.")
"""Official ``utils/prompt_utils.generate_multimodal_understanding_prompt`` system prompt."""

#: special token text -> DiMOO id role (the config.json key it is written under, if any).
SPECIAL_TOKENS: dict[str, str | None] = {
    "<|endoftext|>": None,          # pad / eos
    "<unk>": None,
    "<|mdm_mask|>": "mask_token_id",
    "<system>": None,
    "</system>": None,
    "<user>": None,
    "</user>": None,
    "<uncondition>": "uncondition_token_id",
    "<image>": "boi_token_id",
    "</image>": "eoi_token_id",
    "<answer>": "boa_token_id",
    "</answer>": "eoa_token_id",
    "<newline>": "newline_token_id",
}


def t2i_prompts(caption: str) -> tuple[str, str]:
    """(conditional, unconditional) prompt strings exactly as the official template writes them."""
    head = "<system>" + SYSTEM_PROMPT + "</system>"
    return head + "<user>" + caption + "</user>", head + "<user>" + "<uncondition>" + "</user>"


def split_words(text: str) -> list[str]:
    """The word-level tokens of a text (the tokenizer's Whitespace pre-tokenizer, lower case)."""
    return re.findall(r"\w+|[^\w\s]+", text.lower())


def _words() -> list[str]:
    return sorted(set(split_words(SYSTEM_PROMPT)) | set(vocabulary_words()))


def build_tokenizer(extra_words: Sequence[str] = ()) -> PreTrainedTokenizerFast:
    """The nano tokenizer: ids 0.. specials (in SPECIAL_TOKENS order), then words, then the
    `extra_words` it lacks, in their order (ids of the shipped tokenizer unchanged)."""
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for w in [*_words(), *extra_words]:
        vocab.setdefault(w, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", pad_token="<|endoftext|>",
        eos_token="<|endoftext|>", mask_token="<|mdm_mask|>",
    )


def special_ids(tokenizer: PreTrainedTokenizerFast) -> dict[str, int]:
    """config.json id keys implied by the tokenizer (image ids are added by the caller)."""
    return {key: tokenizer.convert_tokens_to_ids(text)
            for text, key in SPECIAL_TOKENS.items() if key is not None}


def save_tokenizer(out_dir: str | Path, extra_words: Sequence[str] = ()) -> PreTrainedTokenizerFast:
    """Write tokenizer.json + tokenizer_config.json + special_tokens_map.json into `out_dir`."""
    tok = build_tokenizer(extra_words)
    tok.save_pretrained(str(out_dir))
    return tok
