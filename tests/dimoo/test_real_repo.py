"""A folder laid out like the real Alpha-VLLM/Lumina-DiMOO download (tests/kit/real_repo),
each unknown varied: every variant loads and generates, or is refused with one message naming
the file and the fix, with nothing half-loaded left in memory."""

from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest
import torch

from ladr_core.dimoo import CheckpointError, load_dimoo
from ladr_core.dimoo.weights.checkpoint import load_checkpoint
from ladr_core.doctor import diagnose
from tests.kit import real_repo
from tests.kit.real_repo import Variant, copy_repo, write_repo, write_tokenizer, write_vq
from tests.kit.tiny_checkpoint import MARKER

WIDTHS = (126356 + 8192, 134656)


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    root = tmp_path_factory.mktemp("real_repo")
    return {w: write_repo(root / str(w), Variant(width=w)) for w in WIDTHS}


def _variant(bases: dict[int, Path], tmp_path: Path, variant: Variant) -> Path:
    folder = copy_repo(bases[variant.width], tmp_path / variant.name)
    if (variant.tokenizer, variant.uncondition_token) != ("json", True):
        write_tokenizer(folder, variant.tokenizer, variant.uncondition_token)
    if variant.vq != Variant().vq:
        write_vq(folder, variant.vq)
    return folder


LOADS = [Variant(width=w) for w in WIDTHS] + [
    Variant(tokenizer="slow"), Variant(tokenizer="both"), Variant(tokenizer="broken-json"),
    Variant(uncondition_token=False), Variant(tokenizer="slow", uncondition_token=False,
                                              width=134656),
] + [Variant(vq=form) for form in real_repo.VQ_FORMS[1:] if form != "pickle"]


@pytest.mark.parametrize("variant", LOADS, ids=[v.name for v in LOADS])
def test_each_variant_loads_and_generates(bases, tmp_path, variant: Variant) -> None:
    folder = _variant(bases, tmp_path, variant)
    pipe = load_dimoo(str(folder), device="cpu", dtype="fp32")
    width = variant.width
    assert pipe.ids.image_offset == 126356  # the official image utilities' offset, whatever the padding
    assert pipe.config.n_embeddings == width
    res = pipe.generate("a red circle", width=16, height=16, steps=2, seed=0, cfg=2.0)
    assert res.images.shape == (1, 16, 16, 3) and torch.isfinite(res.images).all()
    assert bool(((res.tokens >= 0) & (res.tokens < 8192)).all())
    assert not (folder / MARKER).exists()  # no .py of the folder ran
    _, refusals = diagnose(folder)
    assert refusals == []


def _official_texts() -> list[str]:
    """The official templates' texts (the pack builds them as the official code does)."""
    from ladr_core.dimoo.denoise.prompt import cond_text, uncond_text
    from ladr_core.dimoo.tasks.editing import EDIT_TYPES, edit_texts
    from ladr_core.dimoo.tasks.understanding import understanding_text

    texts = [cond_text(p) for p in ("a red circle left of a blue square", "a cat, 4k!", "")]
    texts.append(uncond_text())
    texts.append(understanding_text("What is in this image? Describe it."))
    for edit_type, (_, user) in EDIT_TYPES.items():
        texts += list(edit_texts("make the sky red" if user is None else "", edit_type))
    return texts


@pytest.mark.parametrize("uncondition_token", [True, False])
def test_official_prompt_ids_are_equal_on_every_tokenizer_route(bases, tmp_path,
                                                                uncondition_token) -> None:
    """tokenizer.json, the slow files alone, and transformers' own fast class (what the
    official AutoTokenizer.from_pretrained gives) encode every official template alike."""
    from transformers import AutoTokenizer

    routes = {}
    for kind in ("json", "slow", "broken-json"):
        folder = _variant(bases, tmp_path, Variant(tokenizer=kind,
                                                   uncondition_token=uncondition_token))
        routes[kind] = load_checkpoint(folder).tokenizer
    official = AutoTokenizer.from_pretrained(str(tmp_path / Variant(
        uncondition_token=uncondition_token).name), trust_remote_code=False)
    assert type(routes["json"]).__name__ == "Tokenizer"
    assert type(routes["slow"]).__name__ == "HFTokenizer"
    for text in _official_texts():
        want = official(text)["input_ids"]
        assert all(tok.encode(text).ids == want for tok in routes.values()), text
        assert routes["slow"].decode(want) == routes["json"].decode(want, skip_special_tokens=True)


def _live_tensor_bytes() -> int:
    gc.collect()
    seen, total = set(), 0
    for obj in gc.get_objects():
        if isinstance(obj, torch.Tensor) and not obj.is_meta:
            try:
                storage = obj.untyped_storage()
                pointer = storage.data_ptr()
            except (RuntimeError, NotImplementedError):
                continue  # a fake or wrapper tensor (left by an earlier compile test): no bytes
            if pointer not in seen:
                seen.add(pointer)
                total += storage.nbytes()
    return total


def _second_read_shard_lacks_a_tensor(folder: Path) -> None:
    """The transformer's shard holding wte is read first; the other lacks a tensor its index
    promises: the load fails after the tokenizer, the VQ and a 17 MB embedding were read."""
    from safetensors.torch import load_file, save_file

    index_path = folder / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())
    first = index["weight_map"]["model.transformer.wte.weight"]
    index["weight_map"] = dict(sorted(index["weight_map"].items(), key=lambda kv: kv[1] != first))
    index_path.unlink()
    index_path.write_text(json.dumps(index))
    other = folder / next(f for f in index["weight_map"].values() if f != first)
    tensors = load_file(str(other))
    tensors.pop(sorted(tensors)[0])
    other.unlink()
    save_file(tensors, str(other))


def _index_names_absent_file(folder: Path) -> None:
    index_path = folder / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())
    key = next(iter(index["weight_map"]))
    index["weight_map"][key] = "model-00003-of-00003.safetensors"
    index_path.unlink()
    index_path.write_text(json.dumps(index))


def _not_dimoo(folder: Path) -> None:
    """A diffusers pipeline folder (SD-style) put where a DiMOO checkpoint belongs."""
    for path in list(folder.iterdir()):
        if path.is_file():
            path.unlink()
    (folder / "model_index.json").write_text(json.dumps({"_class_name": "StableDiffusionPipeline"}))


def _llama_config(folder: Path) -> None:
    path = folder / "config.json"
    raw = json.loads(path.read_text())
    raw.update(model_type="llama", architectures=["LlamaForCausalLM"])
    path.unlink()
    path.write_text(json.dumps(raw))


BAD = [
    ("missing shard", lambda f: (f / "model-00002-of-00002.safetensors").unlink(),
     "model-00002-of-00002.safetensors", "download"),
    ("index names an absent file", _index_names_absent_file, "model-00003-of-00003.safetensors",
     "download"),
    ("VQ shard missing", lambda f: (write_vq(f, "sharded"), (f / "vqvae" / (
        "diffusion_pytorch_model-00002-of-00002.safetensors")).unlink()),
     "diffusion_pytorch_model-00002-of-00002.safetensors", "download"),
    ("VQ pickle", lambda f: write_vq(f, "pickle"), "diffusion_pytorch_model.bin",
     "save_file(torch.load("),
    ("no tokenizer", lambda f: [(f / n).unlink() for n in ("tokenizer.json", "tokenizer_config.json",
                                                           "special_tokens_map.json")],
     "tokenizer.json", "download"),
    ("not a DiMOO folder", _not_dimoo, "config.json", "download"),
    ("a llama config", _llama_config, "config.json", "Lumina-DiMOO folder"),
    ("half-read transformer", _second_read_shard_lacks_a_tensor, "safetensors", "re-download"),
]


@pytest.mark.parametrize(("case", "damage", "names", "fix"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_one_message_and_nothing_stays_loaded(bases, tmp_path, case, damage,
                                                           names, fix) -> None:
    folder = copy_repo(bases[WIDTHS[0]], tmp_path / "bad")
    damage(folder)
    load_checkpoint(bases[WIDTHS[0]])  # warm every import and cache first
    before = _live_tensor_bytes()
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(folder, dtype="fp32")
    leaked = _live_tensor_bytes() - before  # the error is still held, as a host would hold it
    assert leaked < 4096, f"{leaked} bytes of a half-finished load stay alive"
    text = str(info.value)
    assert names in text and fix in text and str(folder) in text
    _, refusals = diagnose(folder)
    assert refusals and any(names in r for r in refusals)


def test_a_variant_vq_name_converts_to_gguf_and_loads(bases, tmp_path) -> None:
    """The converter reads the VQ under the names the loader reads (here sharded)."""
    from ladr_core.dimoo.weights.gguf_write import write_gguf

    folder = _variant(bases, tmp_path, Variant(vq="sharded"))
    out = write_gguf(folder, tmp_path / "repo.gguf", "Q8_0")
    direct, gguf = load_checkpoint(folder, dtype="fp32"), load_checkpoint(out, dtype="fp32")
    for key, value in direct.vq.state_dict().items():
        assert torch.equal(value, gguf.vq.state_dict()[key]), key
