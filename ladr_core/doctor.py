"""``python -m ladr_core.doctor FOLDER``: what a Lumina-DiMOO checkpoint folder holds, how the
loader reads each file, the values in force, which weight formats fit which card, and every
refusal with its fix, without loading a weight (only file headers are read; no code from the
folder runs). The Load DiMOO Model node's error carries the same report.

Host-free: imports nothing from ComfyUI.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["CARD_TABLE_SOURCE", "card_table", "diagnose", "main"]

#: where the estimator's card table is: README's generated block (from
#: lab/results/gpu_estimate.json; lab/benchmarks/gpu_estimate writes it, a test holds it there)
CARD_TABLE_SOURCE = Path(__file__).resolve().parents[1] / "README.md"
_BLOCK = re.compile(r"<!-- gpu_estimate:begin readme -->\n(.*?)<!-- gpu_estimate:end -->", re.S)
#: how the loader treats each kind of file (pattern on the path relative to the folder)
_ROLES = [  # the first pattern that matches
    (r"vqvae/preview_table\.safetensors", "fitted preview colours"),
    (r"config\.json", "the LLaDA config: architecture, vocabulary, special ids"),
    (r"model\.safetensors\.index\.json", "shard index: which file holds each tensor"),
    (r"model(-\d+-of-\d+)?\.safetensors", "transformer weights (safetensors, read lazily)"),
    (r"tokenizer\.json", "fast tokenizer (route 1)"),
    (r"(vocab\.json|merges\.txt|vocab\.txt|tokenizer\.model|spiece\.model|"
     r"sentencepiece\.bpe\.model|added_tokens\.json|special_tokens_map\.json|"
     r"tokenizer_config\.json)", "tokenizer files for transformers (route 2, no remote code)"),
    (r"vqvae/config\.json", "VQ-VAE config (diffusers VQModel)"),
    (r"vqvae/.*\.safetensors(\.index.*\.json)?", "VQ-VAE weights (the form read is named below)"),
    (r".*\.(bin|pt|pth|ckpt|pkl)", "pickle: never read (refused; convert to safetensors)"),
    (r".*\.py", "remote code: never imported"),
    (r"(args|model_index|generation_config)\.json", "not needed: training / pipeline metadata"),
]


def _role(rel: str) -> str:
    return next((why for pat, why in _ROLES if re.fullmatch(pat, rel)), "not read")


def _files(folder: Path) -> list[str]:
    lines = []
    hidden = sorted(p.name + "/" for p in folder.iterdir() if p.name.startswith(".") and p.is_dir())
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        if rel.split("/")[0].startswith("."):
            continue
        size = path.stat().st_size
        lines.append(f"  {rel:<48} {size / 2**20:>9.1f} MiB  {_role(rel)}")
    lines += [f"  {h:<48} {'':>13}  hidden (the download tool's cache): not read" for h in hidden]
    partial = sorted(p.name for p in (folder / ".cache").rglob("*.incomplete")) \
        if (folder / ".cache").is_dir() else []
    if partial:
        lines.append(f"  (the download tool left {len(partial)} unfinished file(s), e.g. "
                     f"{partial[0]}: run huggingface-cli download again to finish them)")
    return lines


def _attempt(refusals: list[str], check: Callable[[], Any]) -> Any:
    """``check()``, or None with its refusal recorded (the loader's own message)."""
    from .dimoo.weights.files import CheckpointError

    try:
        return check()
    except (CheckpointError, ValueError) as exc:
        refusals.append(str(exc))
        return None


def _shard_report(folder: Path, config: Any, refusals: list[str]) -> list[str]:
    """Per shard: tensors, stored dtypes, names and shapes against config.json (headers only)."""
    from .dimoo.weights.files import open_shard, shard_files
    from .dimoo.weights.formats import parameter_shapes

    shards = _attempt(refusals, lambda: shard_files(folder))
    if not shards:
        return []
    expected = {k: tuple(v) for k, v in parameter_shapes(config).items()}
    seen: dict[str, tuple[int, ...]] = {}
    dtypes: set[str] = set()
    for shard in shards:
        handle = _attempt(refusals, lambda s=shard: open_shard(s))
        if handle is None:
            continue
        with handle:
            keys = list(handle.keys())
            for key in keys:
                sl = handle.get_slice(key)
                seen[key], _ = tuple(sl.get_shape()), dtypes.add(sl.get_dtype())
        lacking = sorted(set(shards[shard] or []) - set(keys))
        if lacking:
            refusals.append(f"{shard} lacks {lacking[:3]} promised by the shard index; "
                            "re-download it")
    wrong = sorted(k for k in expected if k in seen and seen[k] != expected[k])
    missing = sorted(set(expected) - set(seen))
    stray = sorted(k for k in set(seen) - set(expected) if not k.endswith("_scale"))
    if missing or stray or wrong:
        refusals.append(f"{folder}: the shards do not match config.json (missing {missing[:3]}, "
                        f"unexpected {stray[:3]}, other shapes {wrong[:3]}); use the config.json "
                        "shipped with these shards, or re-download the missing shard")
    return [f"  transformer: {len(shards)} file(s), {len(seen)} tensors, stored "
            f"{', '.join(sorted(dtypes))}"]


def _size(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def memory_report(folder: Path, config: Any, dtype: Any = None) -> list[str]:
    """The transformer weights' memory once loaded (bf16 compute), as stored and with each
    conversion the loader offers for the folder's weight format: each format's own estimate
    (weights/formats/, ``weight_bytes``)."""
    import torch

    from .dimoo.weights import formats

    dtype = dtype or torch.bfloat16
    stored = formats.stored_format(folder)
    sizes = [f"as stored ({stored.name}) "
             f"{_size(stored.weight_bytes(config, formats.DEFAULT, dtype))}"]
    if getattr(stored, "converts", False):
        for choice in formats.load_choices()[1:]:
            fmt = formats.load_format(choice)
            sizes.append(f"{choice} {_size(fmt.weight_bytes(config, choice, dtype))}")
    return [f"  transformer weights in memory ({str(dtype).removeprefix('torch.')} compute): "
            + "; ".join(sizes)]


def _tokenizer_report(folder: Path, ids: Any, refusals: list[str]) -> list[str]:
    from .dimoo.denoise.prompt import uncond_text
    from .dimoo.weights.tokenizer import check_tokenizer, tokenizer_route

    found = tokenizer_route(folder)
    lines = [f"  tokenizer: {found.route}"] + [f"    (skipped: {p})" for p in found.problems
                                                 if found.tokenizer is not None]
    if found.tokenizer is None:
        refusals.append("; ".join(found.problems) + ". Re-download the tokenizer files")
        return lines
    if _attempt(refusals, lambda: check_tokenizer(found.tokenizer, ids, folder)) is not None:
        unc = found.tokenizer.encode("<uncondition>", add_special_tokens=False).ids
        lines.append(f"  '<uncondition>' encodes to {unc} (the official code tokenizes the text; "
                     "no id is required)")
        lines.append(f"  unconditional prompt: {len(found.tokenizer.encode(uncond_text()).ids)} "
                     "tokens")
    return lines


def _vq_report(folder: Path, ids: Any, refusals: list[str]) -> list[str]:
    from .dimoo.weights.checkpoint import read_vq_config
    from .dimoo.weights.vqfiles import vq_folder, vq_weight_files

    got = _attempt(refusals, lambda: read_vq_config(folder, ids))
    weights = _attempt(refusals, lambda: vq_weight_files(vq_folder(folder)))
    lines = []
    if got is not None:
        lines.append(f"  VQ-VAE: {got[0].get('num_vq_embeddings')} codes, VQ factor "
                     f"{2 ** (len(got[1]) - 1)} px per token side, computed in float32")
    if weights is not None:
        lines.append(f"  VQ-VAE weights: {weights.form}" +
                     (f" (not read: {', '.join(weights.ignored)})" if weights.ignored else ""))
    return lines


def _values(config: Any, ids: Any, raw: dict[str, Any]) -> list[str]:
    from .dimoo.model.config import DIMOO_DEFAULT_IDS, context_length

    width = config.n_embeddings
    derived = "image_token_offset" not in raw
    official = DIMOO_DEFAULT_IDS.image_offset
    note = ("" if ids.image_offset == official else
            f"; the official image utilities assume {official}, so only this pack's path "
            "(which uses the offset above throughout) is consistent for this width")
    keys = [k for k in ids.CONFIG_KEYS.values() if k in raw]
    top = ids.image_offset + ids.codebook_size
    source = ("from config.json" if not derived else
              "the official one: config.json has no image_token_offset" if ids.image_offset == official
              else "= width - codebook_size: config.json has no image_token_offset")
    padding = f"; rows {top}..{width - 1} never read" if top < width else ""
    return [
        f"  logits width {width} (embedding_size, else vocab_size); text ids below "
        f"{ids.image_offset}, image codes {ids.image_offset}..{top - 1} "
        f"({ids.codebook_size} codes; offset {source}){padding}{note}",
        f"  special ids: mask {ids.mask}, newline {ids.newline}, boi {ids.boi}, eoi {ids.eoi}, "
        f"boa {ids.boa}, eoa {ids.eoa} ({'from config.json: ' + ', '.join(keys) if keys else 'DiMOO defaults'})",
        f"  RoPE: theta {config.rope_theta:g}, head dim {config.head_dim}, full precision "
        f"{config.rope_full_precision}",
        f"  maximum length: config.json {config.max_sequence_length}, accepted "
        f"{context_length(config, ids)} tokens (prompt + image)",
        "  dtypes: compute in the loader's dtype (auto: bf16 on a GPU that supports it, else "
        "fp16 / fp32; fp32 on the CPU); weights stored as listed above, converted on load",
    ]


def card_table() -> list[str]:
    """The estimator's card table (README's generated block), or where to find it."""
    try:
        block = _BLOCK.search(CARD_TABLE_SOURCE.read_text(encoding="utf-8"))
    except OSError:
        block = None
    if block is None:
        return ["  see docs/reports/GPU.md Sec. 7 (estimated; README's card table)"]
    return ["  " + line for line in block.group(1).strip().splitlines() if line.strip()]


def diagnose(folder: str | Path) -> tuple[str, list[str]]:
    """(the report, the refusals: the loader's messages, each naming the file and the fix)."""
    from .dimoo.weights.checkpoint import check_complete
    from .dimoo.weights.files import CheckpointError, read_config

    folder = Path(folder).expanduser()
    out = [f"Lumina-DiMOO checkpoint doctor: {folder}", ""]
    refusals: list[str] = []
    if not folder.is_dir():
        refusals.append(f"{folder} is not a folder; download the full Alpha-VLLM/Lumina-DiMOO "
                        "repository (huggingface-cli download) into it")
        return _finish(out, refusals), refusals
    out += ["Files (size, how the loader reads each):", *_files(folder), ""]
    unfinished = check_complete(folder)
    if unfinished:
        refusals.append(unfinished)
    try:
        config, ids, raw = read_config(folder)
    except CheckpointError as exc:
        refusals.append(str(exc))
        return _finish(out, refusals), refusals
    out += ["Values in force:", *_values(config, ids, raw)]
    out += _shard_report(folder, config, refusals)
    out += _attempt(refusals, lambda: memory_report(folder, config)) or []
    out += _tokenizer_report(folder, ids, refusals)
    out += _vq_report(folder, ids, refusals)
    return _finish(out, refusals), refusals


def _finish(out: list[str], refusals: list[str]) -> str:
    out += ["", "Which weight formats fit which card (estimated; convert with python -m "
            "ladr_core.dimoo.save SRC OUT --weight-dtype ...):", *card_table(), ""]
    if refusals:
        out += [f"Refused ({len(refusals)}), each with its fix:"]
        out += [f"  {i}. {r}" for i, r in enumerate(refusals, 1)]
    else:
        out += ["Refused: nothing; the folder loads (ladr_core.load_dimoo or Load DiMOO Model)."]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] in ("-h", "--help"):
        print("usage: python -m ladr_core.doctor FOLDER\n" + __doc__.split("\n\n")[0])
        return 2
    report, refusals = diagnose(args[0])
    print(report)
    return 1 if refusals else 0


if __name__ == "__main__":
    raise SystemExit(main())
