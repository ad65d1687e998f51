"""Weight formats as objects (ladr_core.dimoo.weights.formats): the loader's choices, the save
command's choices and the files each format recognises come from the registry; each format's
memory estimate is what a load of it holds; a format registered elsewhere (the recipe in
ladr_core.dimoo.weights.formats' docstring, run here) appears in Load DiMOO Model's choices and loads
through the node's path, with no other edit."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

import ladr_core
from ladr_core.dimoo import save
from ladr_core.dimoo.weights import formats, fp8
from ladr_core.dimoo.weights.checkpoint import load_checkpoint
from ladr_core.dimoo.weights.convert import Conversion, convert_folder
from ladr_core.dimoo.weights.files import read_config
from ladr_core.dimoo.weights.gguf_write import write_gguf
from nodes import loader

RECIPE_FORMAT = "fp8-per-tensor"


def _loader_widget(name: str) -> object:
    return next(i for i in loader.LoadDiMOOModel.define_schema().inputs if i.id == name)


def _held_bytes(model: torch.nn.Module) -> int:
    return sum(t.numel() * t.element_size() for t in model.state_dict().values())


@pytest.fixture(scope="module")
def stored(dimoo_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The tiny checkpoint in each built-in format (save choice -> its folder or file); the
    ComfyUI fp8 one with an input scale on every layer, as the save command calibrates."""
    out = tmp_path_factory.mktemp("formats")
    config, _, _ = read_config(dimoo_checkpoint)
    layers = {k.removesuffix(".weight"): 1.0 for k in formats.parameter_shapes(config)
              if fp8.is_block_linear_weight(k)}
    made = {"fp8_e4m3fn": convert_folder(dimoo_checkpoint, out / "p8",
                                         Conversion("fp8_e4m3fn", torch.float32)),
            "comfy_fp8_e4m3fn": convert_folder(dimoo_checkpoint, out / "c8", Conversion(
                "comfy_fp8_e4m3fn", torch.float32, input_amax=layers)),
            "comfy_int8": convert_folder(dimoo_checkpoint, out / "i8",
                                         Conversion("comfy_int8", torch.float32))}
    for recipe in ("Q8_0", "Q4_K_M"):
        made[recipe] = write_gguf(dimoo_checkpoint, out / f"{recipe}.gguf", recipe)
    return made


def test_the_choices_are_the_registrys() -> None:
    found = formats.weight_formats()
    assert [f.name for f in found][:1] == ["official"] and {"fp8", "comfy", "gguf"} <= {
        f.name for f in found}
    offered = [c for f in found for c in f.load_choices if c != formats.DEFAULT]
    assert _loader_widget("weight_dtype").options == ["default", *offered]
    assert tuple(c for f in found for c in f.save_choices) == save.FORMATS
    assert loader._one_file("x/model.GGUF") and formats.file_suffixes() == (".gguf",)
    tip = _loader_widget("weight_dtype").tooltip
    assert all(f.describe() in tip for f in found)


def test_each_format_recognises_its_own_files(dimoo_checkpoint: Path, stored) -> None:
    assert formats.stored_format(dimoo_checkpoint).name == "official"
    for choice, path in stored.items():
        assert formats.stored_format(path) is formats.save_format(choice), choice
    assert formats.stored_format(dimoo_checkpoint / "nothing-here").fallback


@pytest.mark.parametrize("choice", ["default", "fp8_e4m3fn", "comfy_fp8_e4m3fn", "comfy_int8",
                                    "Q8_0", "Q4_K_M"])
def test_a_formats_estimate_is_what_its_load_holds(dimoo_checkpoint: Path, stored,
                                                   choice: str) -> None:
    """weight_bytes = the bytes of the loaded transformer's state (float32 compute): converted
    while loading (fp8, from the bf16-like original) or loaded as stored (the others)."""
    if choice in ("default", "fp8_e4m3fn"):
        path, weight_dtype = dimoo_checkpoint, choice
        fmt = formats.load_format(choice) or formats.stored_format(path)
    else:
        path, weight_dtype = stored[choice], None
        fmt = formats.stored_format(path)
    got = load_checkpoint(path, dtype=torch.float32, weight_dtype=weight_dtype)
    assert fmt.weight_bytes(got.config, choice, torch.float32) == _held_bytes(got.transformer)


def test_a_second_owner_of_a_choice_is_refused() -> None:
    class Impostor(formats.WeightFormat):
        name = "impostor-test"
        load_choices = ("fp8_e5m2",)

    with pytest.raises(ValueError, match="choice 'fp8_e5m2' already belongs to weight format "
                                         "'fp8'"):
        formats.register_format(Impostor)
    assert "impostor-test" not in [f.name for f in formats.weight_formats()]


def _recipe() -> str:
    """The example of the formats package's docstring, where a reader adding a format finds it."""
    return textwrap.dedent(formats.__doc__.split("while loading::\n", 1)[1])


@pytest.fixture
def recipe_format():
    exec(compile(_recipe(), "formats recipe", "exec"), {"__name__": "recipe_test"})
    yield formats.weight_formats()[-1]
    formats.unregister_format(RECIPE_FORMAT)
    loader._CACHE.clear()


def test_the_documented_recipe_adds_a_format_the_loader_offers_and_loads(recipe_format
                                                                          ) -> None:
    """The documented format joins the loader's choices and tooltip, and Load DiMOO Model
    loads the built-in nano through it: its block linears in fp8 with one scale per matrix,
    the weights load_dimoo gives with fp8_scale='tensor'."""
    assert recipe_format.name == RECIPE_FORMAT
    assert _loader_widget("weight_dtype").options[-1] == "fp8_e4m3fn_tensor"
    assert recipe_format.describe() in _loader_widget("weight_dtype").tooltip
    model = loader.load_model(loader.NANO, "fp32", "fp8_e4m3fn_tensor")
    ref = ladr_core.load_dimoo(ladr_core.nano_model_path(), dtype=torch.float32,
                               weight_dtype="fp8_e4m3fn", fp8_scale="tensor")
    got, want = model.pipe.transformer.state_dict(), ref.transformer.state_dict()
    scales = [k for k in got if k.endswith("weight_scale")]
    assert scales and all(got[k].unique().numel() == 1 for k in scales)  # one per matrix
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in got)
    assert recipe_format.weight_bytes(model.pipe.config, "fp8_e4m3fn_tensor",
                                      torch.float32) == _held_bytes(model.pipe.transformer)
    formats.unregister_format(RECIPE_FORMAT)
    assert "fp8_e4m3fn_tensor" not in _loader_widget("weight_dtype").options
