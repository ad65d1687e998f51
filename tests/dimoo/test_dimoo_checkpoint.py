"""Official-layout loader: dtype, names, no code from the folder, and every error it names."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from ladr_core.dimoo import CheckpointError
from ladr_core.dimoo.weights.checkpoint import load_checkpoint
from tests.kit.tiny_checkpoint import MARKER


@pytest.fixture
def ckpt_copy(dimoo_checkpoint: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(dimoo_checkpoint, tmp_path / "copy"))


def _edit_config(folder: Path, **changes: object) -> None:
    path = folder / "config.json"
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


def test_loads_into_target_dtype_with_official_names(dimoo_checkpoint: Path) -> None:
    ckpt = load_checkpoint(dimoo_checkpoint, dtype=torch.bfloat16)
    params = dict(ckpt.transformer.named_parameters())
    assert all(p.dtype == torch.bfloat16 and not p.is_meta for p in params.values())
    assert not any(p.requires_grad for p in params.values())
    # bit-exact bf16 rounding of the stored fp32 tensors (no other transformation)
    index = json.loads((dimoo_checkpoint / "model.safetensors.index.json").read_text())
    name = "model.transformer.blocks.1.up_proj.weight"
    stored = load_file(str(dimoo_checkpoint / index["weight_map"][name]))[name]
    assert torch.equal(params[name], stored.to(torch.bfloat16))
    assert ckpt.vq_factor == 4 and ckpt.ids.codebook_size == 32 and ckpt.ids.mask == 2
    assert ckpt.tokenizer.encode("<uncondition>", add_special_tokens=False).ids == [ckpt.ids.uncondition]


def test_dtype_names_and_bad_dtype(dimoo_checkpoint: Path) -> None:
    ckpt = load_checkpoint(dimoo_checkpoint, dtype="fp32")
    assert next(ckpt.transformer.parameters()).dtype == torch.float32
    with pytest.raises(ValueError, match="dtype"):
        load_checkpoint(dimoo_checkpoint, dtype="int8")


def test_bad_or_missing_device_is_named_before_loading(dimoo_checkpoint: Path) -> None:
    with pytest.raises(ValueError, match="'gpu0' is not a torch device"):
        load_checkpoint(dimoo_checkpoint, device="gpu0")
    if not torch.cuda.is_available():  # the CPU-only build here: a clear message, not an assert
        with pytest.raises(ValueError, match="'cuda' is not available here.*device='cpu'"):
            load_checkpoint(dimoo_checkpoint, device="cuda")
    assert load_checkpoint(dimoo_checkpoint, device=torch.device("cpu")).vq.device.type == "cpu"


def test_no_code_from_the_model_folder_runs(dimoo_checkpoint: Path) -> None:
    config = json.loads((dimoo_checkpoint / "config.json").read_text())
    assert "auto_map" in config and (dimoo_checkpoint / "modeling_evil.py").is_file()
    load_checkpoint(dimoo_checkpoint)
    assert not (dimoo_checkpoint / MARKER).exists()
    assert not any("evil" in name for name in sys.modules)


def _drop_shard(folder: Path) -> None:
    (folder / "model-00002-of-00002.safetensors").unlink()


def _truncate_shard(folder: Path) -> None:
    shard = folder / "model-00001-of-00002.safetensors"
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])


def _garbage_shard(folder: Path) -> None:
    (folder / "model-00001-of-00002.safetensors").write_bytes(b"\x00" * 64)


def _shape_mismatch(folder: Path) -> None:
    shard = folder / "model-00001-of-00002.safetensors"
    tensors = load_file(str(shard))
    name = next(k for k in tensors if k.endswith("q_proj.weight"))
    tensors[name] = torch.zeros(3, 3)
    save_file(tensors, str(shard))


def _only_pickle(folder: Path) -> None:
    for p in folder.glob("model*"):
        p.unlink()
    (folder / "pytorch_model.bin").write_bytes(b"not really a pickle")


def _vq_pickle_only(folder: Path) -> None:
    (folder / "vqvae" / "diffusion_pytorch_model.safetensors").unlink()
    (folder / "vqvae" / "diffusion_pytorch_model.bin").write_bytes(b"pickle")


ERRORS: list[tuple[str, Callable[[Path], None], str]] = [
    ("missing config", lambda f: (f / "config.json").unlink(), r"config\.json is missing"),
    ("corrupt config", lambda f: (f / "config.json").write_text("{oops"), "not valid JSON"),
    ("not llada", lambda f: _edit_config(f, model_type="llama", architectures=["LlamaForCausalLM"]),
     "not a LLaDA checkpoint"),
    ("missing index and shards", lambda f: [p.unlink() for p in f.glob("model*")],
     "has no model.safetensors.index.json"),
    ("missing shard", _drop_shard, r"model-00002-of-00002\.safetensors is listed"),
    ("truncated shard", _truncate_shard, r"model-00001-of-00002\.safetensors.*(truncated|corrupt)"),
    ("garbage shard", _garbage_shard, r"model-00001-of-00002\.safetensors.*(truncated|corrupt)"),
    ("shape mismatch", _shape_mismatch, r"q_proj\.weight has shape \(3, 3\)"),
    ("missing keys", lambda f: _edit_config(f, n_layers=3), r"missing \['model\.transformer\.blocks\.2"),
    ("unexpected keys", lambda f: _edit_config(f, n_layers=1), r"unexpected \['model\.transformer\.blocks\.1"),
    ("pickle weights", _only_pickle, r"pickle weights \(pytorch_model\.bin\).*refused"),
    ("missing tokenizer", lambda f: (f / "tokenizer.json").unlink(), r"tokenizer\.json is missing"),
    ("ids outside vocab", lambda f: _edit_config(f, image_token_offset=60),
     "exceeds the logits width"),
    ("missing vqvae", lambda f: shutil.rmtree(f / "vqvae"), r"vqvae/config\.json is missing"),
    ("vqvae pickle only", _vq_pickle_only, "pickle weights.*refused"),
    ("codebook mismatch", lambda f: _edit_config(f, codebook_size=16, image_token_offset=48),
     "num_vq_embeddings 32 != codebook_size 16"),  # offset moved so the ids agree (item 15)
]


@pytest.mark.parametrize(("case", "damage", "message"), ERRORS, ids=[e[0] for e in ERRORS])
def test_loader_errors_name_the_file_and_fix(ckpt_copy: Path, case: str,
                                             damage: Callable[[Path], None], message: str) -> None:
    damage(ckpt_copy)
    with pytest.raises(CheckpointError, match=message) as info:
        load_checkpoint(ckpt_copy)
    text = str(info.value)
    assert str(ckpt_copy) in text  # names the file / folder
    assert any(w in text for w in ("download", "use ", "Use ", "fix", "Point", "re-download",
                                   "convert", "belong")), text


def test_single_file_layout_loads_and_loose_shards_are_refused(ckpt_copy: Path) -> None:
    shards = sorted(ckpt_copy.glob("model-*.safetensors"))
    merged = {k: v for shard in shards for k, v in load_file(str(shard)).items()}
    save_file(merged, str(ckpt_copy / "model.safetensors"))
    for shard in shards:
        shard.unlink()
    (ckpt_copy / "model.safetensors.index.json").unlink()
    ckpt = load_checkpoint(ckpt_copy, dtype=torch.float32)
    name = "model.transformer.wte.weight"
    assert torch.equal(ckpt.transformer.state_dict()[name], merged[name])
    (ckpt_copy / "model.safetensors").rename(ckpt_copy / "model-00001-of-00001.safetensors")
    with pytest.raises(CheckpointError, match=r"found model-00001-of-00001\.safetensors without"):
        load_checkpoint(ckpt_copy)


def test_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="does not exist.*download"):
        load_checkpoint(tmp_path / "nope")
