"""Image-token offset: without an image_token_offset key it is the official 126356 (the
official image utilities hard-code it) wherever its 8192 codes fit the head; a checkpoint with
its own special ids and a narrower head takes the width minus its codebook; a head whose width
and offset cannot both be right is refused once, naming config.json's key and the fix."""

from __future__ import annotations

import json

import pytest

from ladr_core import nano_model_path
from ladr_core.dimoo import CheckpointError
from ladr_core.dimoo.model.config import ConfigError, DiMOOIds
from ladr_core.dimoo.weights.checkpoint import load_checkpoint
from ladr_core.dimoo.weights.files import read_config
from tests.kit.tiny_checkpoint import write_tiny_checkpoint

OFFICIAL = 126356
PADDED_WIDTH = 134656  # the real head: 126464 text rows (LLaDA's) + 8192, 108 above the codes


@pytest.mark.parametrize("width", [OFFICIAL + 8192, PADDED_WIDTH])
def test_without_an_offset_key_a_head_that_fits_it_gets_the_official_offset(width) -> None:
    ids = DiMOOIds.from_config_dict({}, width=width)
    assert ids.image_offset == OFFICIAL  # not width - 8192 (126464 on the padded head)
    ids.validate_against(width)


def test_the_built_in_models_keep_their_own_offset_key() -> None:
    """nano's config.json sets image_token_offset (45) for its narrow head: read as written,
    the head's last codebook_size rows, as before."""
    config, ids, raw = read_config(nano_model_path())
    assert raw["image_token_offset"] == ids.image_offset == 45
    assert ids.image_offset + ids.codebook_size == config.n_embeddings


def test_a_narrow_head_with_its_own_ids_and_no_key_takes_its_last_rows() -> None:
    raw = {"mask_token_id": 5, "newline_token_id": 6, "boi_token_id": 7, "eoi_token_id": 8,
           "boa_token_id": 9, "eoa_token_id": 10, "uncondition_token_id": 11,
           "codebook_size": 32}
    ids = DiMOOIds.from_config_dict(raw, width=96)
    assert ids.image_offset == 64
    ids.validate_against(96)


@pytest.mark.parametrize("raw", [{}, {"image_token_offset": OFFICIAL + 200}])
def test_a_head_too_narrow_for_the_offset_is_one_message_naming_the_key(raw) -> None:
    """Official special ids with a head narrower than 126356 + 8192 (no key), or a key whose
    codes would run past the head: one ConfigError naming image_token_offset and the fix."""
    with pytest.raises(ConfigError) as err:
        ids = DiMOOIds.from_config_dict(raw, width=PADDED_WIDTH - 200 if not raw else PADDED_WIDTH)
        ids.validate_against(PADDED_WIDTH - 200 if not raw else PADDED_WIDTH)
    text = str(err.value)
    assert "image_token_offset" in text and "exceeds the logits width" in text
    assert "Set image_token_offset in config.json" in text and "re-download" in text


def test_the_loader_reads_a_padded_head_and_refuses_a_contradicting_key(tmp_path) -> None:
    folder = write_tiny_checkpoint(tmp_path / "ckpt")
    config = json.loads((folder / "config.json").read_text())
    _, before, _ = read_config(folder)
    config["image_token_offset"] -= 1  # one padding row above the codes: both can be right
    (folder / "config.json").write_text(json.dumps(config))
    _, ids, _ = read_config(folder)
    assert ids.image_offset == before.image_offset - 1
    config["image_token_offset"] = config["vocab_size"] - 1  # codes past the head
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="image_token_offset") as err:
        load_checkpoint(folder)
    assert "config.json" in str(err.value) and str(err.value).count("image_token_offset") >= 2


@pytest.mark.parametrize(("edit", "needle"), [
    (lambda c: c.update(embedding_size=c["vocab_size"] + 8), r"config.json implies"),
    (lambda c: c.update(codebook_size=c["codebook_size"] - 2), r"codebook_size"),
])
def test_the_loader_still_refuses_a_config_the_weights_contradict(tmp_path, edit, needle) -> None:
    """A wider head in config.json alone (the weights are not) and a codebook the VQ does not
    have: refused by the weights' and the VQ's checks, naming config.json."""
    folder = write_tiny_checkpoint(tmp_path / "ckpt")
    config = json.loads((folder / "config.json").read_text())
    edit(config)
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=needle) as err:
        load_checkpoint(folder)
    assert "config.json" in str(err.value)
