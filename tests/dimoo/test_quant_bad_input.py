"""Bad input for the quantized formats: each gets one error naming the file and the fix, and
nothing is half-loaded or left looking valid."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType, GGUFWriter
from safetensors import safe_open
from safetensors.torch import save_file

from ladr_core import load_dimoo, nano_model_path
from ladr_core.dimoo import CheckpointError, save
from ladr_core.dimoo.weights import convert, gguf_write, quant, staging
from ladr_core.dimoo.weights.convert import Conversion, convert_folder
from nodes import loader

NANO = Path(nano_model_path())


@pytest.fixture(scope="module")
def int8_folder(tmp_path_factory) -> Path:
    return convert_folder(NANO, tmp_path_factory.mktemp("q") / "int8",
                          Conversion("comfy_int8", torch.float32))


@pytest.fixture(scope="module")
def q8_file(tmp_path_factory) -> Path:
    return gguf_write.write_gguf(NANO, tmp_path_factory.mktemp("g") / "nano-Q8_0.gguf", "Q8_0")


def _rewrite(folder: Path, dst: Path, edit) -> Path:
    """Copy ``folder`` to ``dst`` with ``edit(tensors, metadata)`` applied to its one shard."""
    import shutil

    shutil.copytree(folder, dst)
    shard = next(dst.glob("model-*.safetensors"))
    with safe_open(str(shard), "pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118
        meta = dict(f.metadata())
    edit(tensors, meta)
    save_file(tensors, str(shard), meta)
    return dst


def _set_format(meta: dict, layer: str, fmt: str) -> None:
    data = json.loads(meta[quant.METADATA_KEY])
    data["layers"][layer] = {"format": fmt}
    meta[quant.METADATA_KEY] = json.dumps(data)


def test_metadata_naming_an_unknown_format(int8_folder: Path, tmp_path: Path) -> None:
    bad = _rewrite(int8_folder, tmp_path / "bad", lambda t, m: _set_format(
        m, "model.transformer.blocks.3.up_proj", "nvfp4"))
    with pytest.raises(CheckpointError, match=r"model-00001-of-00001\.safetensors: layer "
                       r"model\.transformer\.blocks\.3\.up_proj uses quantization format "
                       r"'nvfp4', which this loader does not run \(it runs float8_e4m3fn, "
                       r"float8_e5m2, int8_tensorwise\); convert the bf16 original again"):
        load_dimoo(bad, dtype=torch.float32)


@pytest.mark.parametrize(("case", "message"), [
    ("json", r"_quantization_metadata is not valid"),
    ("head", r"layer model\.transformer\.ff_out is quantized, but only the block linears"),
    ("scale", r"blocks\.0\.q_proj\.weight_scale is missing"),
    ("dtype", r"blocks\.0\.q_proj\.weight is F8_E4M3, but format int8_tensorwise stores int8"),
    ("negative", r"blocks\.0\.q_proj\.weight_scale holds non-finite or non-positive scales"),
])
def test_broken_quantized_folders_name_the_shard(int8_folder: Path, tmp_path: Path, case: str,
                                                 message: str) -> None:
    q = "model.transformer.blocks.0.q_proj"

    def edit(t: dict, m: dict) -> None:
        if case == "json":
            m[quant.METADATA_KEY] = "{not json"
        elif case == "head":
            _set_format(m, "model.transformer.ff_out", "int8_tensorwise")
        elif case == "scale":
            del t[q + ".weight_scale"]
        elif case == "dtype":
            t[q + ".weight"] = t[q + ".weight"].float().to(torch.float8_e4m3fn)
        else:
            t[q + ".weight_scale"] = -t[q + ".weight_scale"]

    bad = _rewrite(int8_folder, tmp_path / case, edit)
    with pytest.raises(CheckpointError, match=r"model-00001-of-00001\.safetensors.*" + message):
        load_dimoo(bad, dtype=torch.float32)


def test_a_format_the_device_or_torch_cannot_run(int8_folder: Path, tmp_path: Path,
                                                 monkeypatch) -> None:
    fp8 = convert_folder(NANO, tmp_path / "fp8", Conversion("comfy_fp8_e4m3fn", torch.float32))
    from ladr_core.dimoo.weights.quant_load import check_format_support

    with pytest.raises(RuntimeError, match=r"holds float8_e4m3fn weights, which device meta "
                       r"cannot store or cast .* or use a GGUF Q8_0 file"):
        check_format_support("float8_e4m3fn", torch.device("meta"), torch.float32, fp8)
    monkeypatch.setitem(quant.COMFY_FORMATS, "float8_e4m3fn", "float8_not_in_this_torch")
    with pytest.raises(RuntimeError, match=r"fp8.*needs torch\.float8_not_in_this_torch, which "
                       r"torch .* lacks; install torch >= 2\.1, or use a GGUF Q8_0 file"):
        load_dimoo(fp8, dtype=torch.float32)


def test_already_quantized_inputs_refuse_a_conversion_on_load(int8_folder: Path,
                                                              q8_file: Path) -> None:
    with pytest.raises(ValueError, match=r"is already quantized \(int8_tensorwise, ComfyUI "
                       r"format\); load it with weight_dtype='default'"):
        load_dimoo(int8_folder, weight_dtype="fp8_e4m3fn")
    with pytest.raises(ValueError, match=r"is a GGUF file, already quantized"):
        load_dimoo(q8_file, weight_dtype="fp8_e4m3fn")


def _small_gguf(path: Path, arch: str) -> Path:
    w = GGUFWriter(str(path), arch)
    w.add_tensor("token_embd.weight", np.zeros((4, 32), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_a_gguf_of_another_architecture(tmp_path: Path) -> None:
    path = _small_gguf(tmp_path / "llama-7b.Q4_K_M.gguf", "llama")
    with pytest.raises(CheckpointError, match=r"llama-7b\.Q4_K_M\.gguf holds a 'llama' model "
                       r"\(general\.architecture\), not Lumina-DiMOO .*python -m "
                       r"ladr_core\.dimoo\.save"):
        load_dimoo(path)


def test_a_gguf_with_missing_tensors(tmp_path: Path, monkeypatch) -> None:
    real = gguf_write.plan_gguf
    monkeypatch.setattr(gguf_write, "plan_gguf", lambda src, r: [
        p for p in real(src, r) if p["name"] != "blocks.4.k_proj.weight"])
    path = gguf_write.write_gguf(NANO, tmp_path / "cut.gguf", "Q8_0")
    with pytest.raises(CheckpointError, match=r"cut\.gguf: tensors do not match its config "
                       r"\(missing \['blocks\.4\.k_proj\.weight'\].*incomplete or was made for"):
        load_dimoo(path)


def test_a_gguf_with_a_type_this_loader_does_not_read(tmp_path: Path, q8_file: Path,
                                                      monkeypatch) -> None:
    real = gguf_write.tensor_type
    monkeypatch.setattr(gguf_write, "tensor_type", lambda r, n, s, k: (
        ("Q4_0", False) if n == "blocks.1.up_proj.weight" else real(r, n, s, k)))
    monkeypatch.setitem(gguf_write.ggml.BLOCK, "Q4_0", (2, 32, 18))
    monkeypatch.setitem(gguf_write.ggml._QUANT, "Q4_0", lambda x: torch.zeros(
        x.numel() // 32, 18, dtype=torch.uint8))
    path = gguf_write.write_gguf(NANO, tmp_path / "q4_0.gguf", "Q8_0")
    assert GGMLQuantizationType.Q4_0 == 2
    monkeypatch.undo()
    with pytest.raises(CheckpointError, match=r"blocks\.1\.up_proj\.weight has GGML type Q4_0, "
                       r"which this loader does not read \(it reads F32, F16, BF16, Q8_0"):
        load_dimoo(path)


def test_a_truncated_gguf(tmp_path: Path, q8_file: Path) -> None:
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(q8_file.read_bytes()[: q8_file.stat().st_size // 2])
    with pytest.raises(CheckpointError, match=r"cut\.gguf (is truncated|is not a readable GGUF)"):
        load_dimoo(cut)
    tiny = tmp_path / "tiny.gguf"
    tiny.write_bytes(struct.pack("<I", 0x46554747))
    with pytest.raises(CheckpointError, match=r"tiny\.gguf is not a readable GGUF file"):
        load_dimoo(tiny)


def test_an_interrupted_conversion_leaves_nothing_that_loads(tmp_path: Path, monkeypatch) -> None:
    calls = []

    def failing(*args, **kwargs):
        calls.append(1)
        raise OSError("disk full")

    monkeypatch.setattr(convert, "write_safetensors", failing)
    with pytest.raises(OSError, match="disk full"):
        convert_folder(NANO, tmp_path / "fp8", Conversion("comfy_fp8_e4m3fn"))
    assert calls and not list(tmp_path.iterdir())  # no DST, no staging folder left behind
    monkeypatch.setattr(gguf_write.ggml, "quantize", failing)
    with pytest.raises(OSError, match="disk full"):
        gguf_write.write_gguf(NANO, tmp_path / "x.gguf", "Q8_0")
    assert not list(tmp_path.iterdir())


def test_a_killed_conversion_is_refused_and_not_listed(tmp_path: Path, monkeypatch) -> None:
    killed = staging.staged_folder(tmp_path / "DiMOO-fp8")
    stage = killed.__enter__()  # the process dies here: the context never exits
    (stage / "config.json").write_text((NANO / "config.json").read_text())
    assert stage.name.startswith(".") and not (tmp_path / "DiMOO-fp8").exists()
    with pytest.raises(CheckpointError, match=r"is a conversion that did not finish .*delete the "
                       r"folder and run the converter again"):
        load_dimoo(stage)
    visible = tmp_path / "visible"  # even renamed by hand, the marker keeps it out
    stage.rename(visible)
    (tmp_path / "ok.gguf").write_bytes(b"")
    (tmp_path / ".hidden.gguf").write_bytes(b"")
    monkeypatch.setenv("LADR_MODELS_DIR", str(tmp_path))
    assert loader.model_choices() == [*loader.BUILT_IN, "ok.gguf"]
    with pytest.raises(ValueError, match=r"GGUF file 'gone\.gguf' was not found in .*--weight-dtype"):
        loader.resolve_model_path("gone.gguf")


def test_the_node_caches_nothing_after_a_failed_load(tmp_path: Path, monkeypatch) -> None:
    _small_gguf(tmp_path / "other.gguf", "llama")
    monkeypatch.setenv("LADR_MODELS_DIR", str(tmp_path))
    loader._CACHE.clear()
    with pytest.raises(CheckpointError, match="not Lumina-DiMOO"):
        loader.load_model("other.gguf", "fp32")
    assert loader._CACHE == {}


def test_the_converter_command_line_reports_bad_input_in_one_line(q8_file: Path,
                                                                  int8_folder: Path,
                                                                  tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"^error: .*nano-Q8_0\.gguf exists; pick a new file"):
        save.main([str(NANO), str(q8_file), "--weight-dtype", "Q8_0"])
    fp8 = convert_folder(NANO, tmp_path / "fp8", Conversion("comfy_fp8_e4m3fn"))
    with pytest.raises(SystemExit, match=r"blocks\.0\.attn_out\.weight is already fp8; convert "
                       r"from the bf16 original"):
        save.main([str(fp8), str(tmp_path / "again"), "--weight-dtype", "comfy_int8"])
    with pytest.raises(SystemExit, match=r"a GGUF output must end in \.gguf"):
        save.main([str(NANO), str(tmp_path / "x.bin"), "--weight-dtype", "Q4_K_M"])


@pytest.mark.parametrize("name", ["/etc", "../outside", "sub/../../outside.gguf",
                                  "..\\outside.gguf"])
def test_a_name_outside_the_model_folders_is_refused(tmp_path: Path, monkeypatch,
                                                     name: str) -> None:
    """A shared workflow's model_name is a name in the model folders, never a path elsewhere,
    even where that path holds a checkpoint."""
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "config.json").write_text("{}")
    (outside.parent / "outside.gguf").write_bytes(b"")
    models = tmp_path / "models"
    (models / "sub").mkdir(parents=True)
    monkeypatch.setenv("LADR_MODELS_DIR", str(models))
    with pytest.raises(ValueError, match=r"^model_name: .* points outside the lumina_dimoo model "
                                         r"folders .*pick its name from the list$"):
        loader.resolve_model_path(name)
