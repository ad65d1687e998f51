"""The checkpoint's tokenizer, read the ways the official code can read it, never running code
from the folder.

The official ``AutoTokenizer.from_pretrained(checkpoint)`` takes ``tokenizer.json`` when
present, else the files of the class ``tokenizer_config.json`` names. Routes, in order:
1. ``tokenizer.json`` through ``tokenizers.Tokenizer`` (what the fast class wraps);
2. else, or when it cannot be parsed, transformers' ``AutoTokenizer`` with
   ``trust_remote_code=False`` and ``local_files_only=True``, wrapped as ``HFTokenizer``.
Both give ``tokenizer(text)["input_ids"]``, the official prompt ids. ``<uncondition>`` is
tokenized like any text: the official code never uses an id for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ..model.config import DiMOOIds
from .files import HUB_HINT, TEMPLATE_TOKENS, CheckpointError

__all__ = ["HFTokenizer", "TokenizerRoute", "check_tokenizer", "load_tokenizer",
           "tokenizer_route", "TOKENIZER_FILES"]

#: files transformers' tokenizer classes read (besides tokenizer.json)
TOKENIZER_FILES = ("tokenizer_config.json", "special_tokens_map.json", "vocab.json",
                   "merges.txt", "vocab.txt", "tokenizer.model", "spiece.model",
                   "sentencepiece.bpe.model", "added_tokens.json")


class HFTokenizer:
    """A transformers tokenizer with ``tokenizers.Tokenizer``'s ``encode(text).ids`` and
    ``decode(ids, skip_special_tokens)``, the two calls the pack makes."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def encode(self, text: str, add_special_tokens: bool = True) -> Any:
        ids = self.tokenizer(text, add_special_tokens=add_special_tokens)["input_ids"]
        return SimpleNamespace(ids=list(ids))

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)


@dataclass
class TokenizerRoute:
    """How a folder's tokenizer was read: ``route`` names it, ``tokenizer`` is None when every
    route failed (``problems`` says why, one line each)."""

    route: str
    tokenizer: Any = None
    files: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _fast(path: Path) -> Any:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(path))


def _slow(folder: Path, names: list[str]) -> HFTokenizer:
    """transformers' tokenizer from copies of the tokenizer files ``names`` alone (never an
    unusable tokenizer.json beside them, never a .py: nothing else is in the copy's folder)."""
    import shutil
    import tempfile

    from transformers import AutoTokenizer

    with tempfile.TemporaryDirectory(prefix="ladr_tokenizer_") as tmp:
        for name in names:
            shutil.copyfile(folder / name, Path(tmp) / name)
        tok = AutoTokenizer.from_pretrained(tmp, trust_remote_code=False, local_files_only=True)
    return HFTokenizer(tok)


def tokenizer_route(folder: Path) -> TokenizerRoute:
    """The first route that reads the folder's tokenizer (module docstring); nothing raised."""
    files = [n for n in ("tokenizer.json", *TOKENIZER_FILES) if (folder / n).is_file()]
    problems = []
    if (folder / "tokenizer.json").is_file():
        try:
            return TokenizerRoute("tokenizer.json (tokenizers)", _fast(folder / "tokenizer.json"),
                                  files)
        except Exception as exc:
            problems.append(f"{folder / 'tokenizer.json'} cannot be parsed ({exc})")
    slow = [n for n in TOKENIZER_FILES if n != "tokenizer_config.json" and n in files]
    if slow:
        try:
            tok = _slow(folder, [n for n in files if n != "tokenizer.json"])
            return TokenizerRoute(f"transformers {type(tok.tokenizer).__name__} "
                                  f"({', '.join(slow)})", tok, files)
        except Exception as exc:  # transformers raises ValueError / OSError / its own
            problems.append(f"transformers cannot read {', '.join(slow)} in {folder} "
                            f"without remote code ({type(exc).__name__}: {exc})")
    if not files or files == ["tokenizer_config.json"]:
        problems.append(f"{folder / 'tokenizer.json'} is missing (the fast tokenizer), and no "
                        f"other tokenizer file is there ({', '.join(TOKENIZER_FILES[2:])})")
    return TokenizerRoute("none", None, files, problems)


def load_tokenizer(folder: Path, ids: DiMOOIds) -> Any:
    """The folder's tokenizer by the first route that reads it, template tokens checked;
    CheckpointError naming the files and the fix when none does."""
    found = tokenizer_route(folder)
    if found.tokenizer is None:
        raise CheckpointError("; ".join(found.problems) + f". Re-download the tokenizer files "
                              f"({HUB_HINT})")
    return check_tokenizer(found.tokenizer, ids, folder / found.files[0])


def check_tokenizer(tokenizer: Any, ids: DiMOOIds, path: Any) -> Any:
    """The tokenizer if it encodes each token the official templates write literally to at
    least one id, else CheckpointError (``ids``: kept for the callers; the official code uses
    no id for them)."""
    del ids
    for text in TEMPLATE_TOKENS:
        if not tokenizer.encode(text, add_special_tokens=False).ids:
            raise CheckpointError(f"{path} encodes {text!r} to no token, but the DiMOO template "
                                  "writes it; use the tokenizer shipped with the checkpoint")
    return tokenizer
