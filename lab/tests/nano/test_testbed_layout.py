"""The nano training layout is the runtime's (official) layout, token for token."""

from __future__ import annotations

import torch

from lab.nano.tokenizer import build_tokenizer, t2i_prompts
from lab.nano.train_transformer import build_ids, code_positions, image_part, make_batch
from ladr_core.dimoo.denoise.prompt import ImageLayout, build_prompt_batch


def _setup():
    tok = build_tokenizer()
    ids = build_ids(tok, codebook_size=32)
    return tok, ids


def test_fully_masked_training_row_equals_runtime_row():
    tok, ids = _setup()
    captions = ["a red circle", "three squares to the left"]  # different prompt lengths
    encode = lambda text: tok(text)["input_ids"]  # noqa: E731
    runtime = build_prompt_batch(encode, ids, captions, None, ImageLayout(3, 4), with_uncond=True)
    codes = torch.randint(0, 32, (2, 3, 4), generator=torch.Generator().manual_seed(0))
    prompts = [encode(t2i_prompts(c)[0]) for c in captions]
    g = torch.Generator().manual_seed(1)
    inp, att, masked, targets = make_batch(prompts, codes, ids, g)
    # wherever training masked a code the runtime also has MASK; elsewhere the code itself
    filled = runtime.input_ids[:2].clone()
    cols = runtime.code_index
    filled[:, cols] = codes.reshape(2, -1) + ids.image_offset
    expect = torch.where(masked, torch.full_like(filled, ids.mask), filled)
    assert torch.equal(inp, expect)
    assert torch.equal(att, runtime.attention_mask[:2])
    assert masked.any(1).all() and not masked[:, :-runtime.layout.length].any()
    assert torch.equal(targets[masked], codes.reshape(2, -1)[masked[:, cols]].long())
    # the unconditional prompt is the runtime's uncond row
    u = encode(t2i_prompts("")[1])
    assert u == runtime.input_ids[2][runtime.attention_mask[2].bool()].tolist()[: len(u)]


def test_only_image_codes_are_ever_masked():
    _, ids = _setup()
    codes = torch.zeros(64, 3, 4, dtype=torch.long)
    g = torch.Generator().manual_seed(0)
    _, _, masked, _ = make_batch([[1, 2]] * 64, codes, ids, g)
    part = masked[:, 2:]
    allowed = torch.zeros(part.shape[1], dtype=torch.bool)
    allowed[code_positions(3, 4)] = True
    assert not part[:, ~allowed].any()
    counts = part.sum(1)
    assert counts.min() >= 1 and counts.max() <= 12 and counts.float().std() > 0


def test_image_part_layout():
    _, ids = _setup()
    part = image_part(torch.tensor([[[0, 1], [2, 3]]]), ids)[0].tolist()
    off = ids.image_offset
    assert part == [ids.boa, ids.boi, off, off + 1, ids.newline, off + 2, off + 3, ids.newline,
                    ids.eoi, ids.eoa]


def test_scenes_are_grid_aligned_so_the_part_catalogue_holds_every_patch():
    import numpy as np

    from lab.nano import scenes
    from lab.nano.vq import patches

    images, _ = scenes.make_dataset(300, 11)
    seen = np.unique(patches(images, scenes.CELL).reshape(-1, 48), axis=0)
    cat = np.unique(patches(scenes.part_catalogue(), scenes.CELL).reshape(-1, 48), axis=0)
    # every patch of a scene is in the catalogue (background included)
    assert len(np.unique(np.concatenate([cat, seen]), axis=0)) == len(cat)
    # and free placement would not be: a shape one pixel off the grid makes new patches
    off = scenes.render((scenes.Obj("circle", "red", 21.0, 21.0, 12),))[None]
    assert len(np.unique(np.concatenate([cat, patches(off, 4).reshape(-1, 48)]), axis=0)) > len(cat)


def test_code_table_gives_one_code_per_distinct_patch():
    import numpy as np
    import pytest

    from lab.nano import scenes
    from lab.nano.vq import build_code_table, build_vq

    vq = build_vq(0).eval()  # untrained: the table must still be one to one
    images = np.concatenate([scenes.make_dataset(40, 3)[0], scenes.part_catalogue()])
    table, stats = build_code_table(vq, images)
    assert stats["distinct_patches"] == len(table.patches) == len(table.codes)
    assert len(set(table.codes.tolist())) == len(table.codes)  # one to one
    assert table.factor == 4
    codes = table.lookup(images)
    assert codes.shape == (len(images), 12, 12)
    # identical patches share a code: all-background tokens carry a single code
    bg = (images.reshape(-1, 12, 4, 12, 4, 3) == scenes.BACKGROUND).all(axis=(2, 4, 5))
    assert codes[torch.from_numpy(bg)].unique().numel() == 1
    # a patch that is not in the table is refused with a clear message
    odd = scenes.render((scenes.Obj("circle", "red", 21.0, 21.0, 12),))[None]
    with pytest.raises(ValueError, match="not in the code table"):
        table.lookup(odd)
