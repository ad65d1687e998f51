"""The emoji picture world: pinned packages, the bank and its refusals, one error per bad input."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from fake_packages import colour, write_all, write_tarball

from lab.emoji import bank as bank_mod
from lab.emoji import packages
from lab.emoji.packages import BY_STYLE, INSTALL_COMMAND, PACKAGES, EmojiDataError
from lab.emoji.vocab import VOCAB


def test_pins_are_exact_versions_of_free_sets_only():
    for p in PACKAGES:
        assert p.version.count(".") == 2 and p.version.replace(".", "").isdigit()
        assert not any(bad in p.name for bad in ("apple", "facebook"))


def test_missing_package_names_it_and_the_install_command(emoji_cache):
    with pytest.raises(EmojiDataError) as err:
        bank_mod.build_bank()
    first = PACKAGES[0]
    assert first.name in str(err.value) and first.version in str(err.value)
    assert INSTALL_COMMAND in str(err.value)


def test_wrong_version_is_refused_with_the_force_command(emoji_cache):
    pkg = BY_STYLE["openmoji"]
    write_tarball(pkg, version="1.0.0")
    with pytest.raises(EmojiDataError) as err:
        packages.check_tarball(pkg)
    msg = str(err.value)
    assert "1.0.0" in msg and pkg.version in msg and f"{INSTALL_COMMAND} --force" in msg


def test_no_network_gives_one_message_naming_the_package(emoji_cache, monkeypatch):
    def offline(*args, **kwargs):
        return subprocess.CompletedProcess(args, 1, "", "npm error code ENOTFOUND registry")

    monkeypatch.setattr(packages.subprocess, "run", offline)
    with pytest.raises(EmojiDataError) as err:
        packages.install()
    msg = str(err.value)
    assert f"{PACKAGES[0].name}@{PACKAGES[0].version}" in msg and "ENOTFOUND" in msg
    assert INSTALL_COMMAND in msg
    assert not packages.tarball_path(PACKAGES[0]).exists()


def test_install_keeps_present_tarballs(emoji_cache, monkeypatch):
    write_all()
    monkeypatch.setattr(packages.subprocess, "run", lambda *a, **k: pytest.fail("fetched again"))
    assert packages.install() == [packages.tarball_path(p) for p in PACKAGES]


def test_corrupt_picture_names_the_file(emoji_cache):
    write_all()
    pkg = BY_STYLE["twemoji"]
    member = f"img/twitter/64/{VOCAB[3].code.lower()}.png"
    write_tarball(pkg, replace={member: b"\x89PNG\r\n\x1a\n not a picture"})
    with pytest.raises(EmojiDataError) as err:
        bank_mod.build_bank()
    assert member in str(err.value) and "--force" in str(err.value)
    assert not bank_mod.bank_dir().exists()
    assert not list(bank_mod.bank_dir().parent.glob("*.tmp-*"))   # nothing half-built is left


def test_bank_holds_every_emoji_in_every_style(emoji_cache):
    pytest.importorskip("cairosvg")
    write_all()
    bank_mod.build_bank()
    bank = bank_mod.load_bank()
    assert bank.styles == bank_mod.STYLES
    assert bank.sprites.shape == (len(bank.styles), len(VOCAB), bank_mod.SPRITE, bank_mod.SPRITE, 4)
    centre = bank.full[:, :, bank_mod.FULL // 2, bank_mod.FULL // 2]
    for i in range(len(VOCAB)):   # the normalised picture is the source's own drawing, centred
        assert np.abs(centre[:, i, :3].astype(int) - colour(i)).max() <= 2
    assert (centre[..., 3] == 255).all()


def test_bank_with_a_changed_file_or_no_manifest_is_refused(emoji_cache):
    pytest.importorskip("cairosvg")
    write_all()
    folder = bank_mod.build_bank()
    with open(folder / "bank.npz", "ab") as f:
        f.write(b"x")
    with pytest.raises(EmojiDataError, match="checksum"):
        bank_mod.load_bank()
    (folder / "manifest.json").unlink()
    with pytest.raises(EmojiDataError, match="incomplete") as err:
        bank_mod.load_bank()
    assert bank_mod.BUILD_COMMAND in str(err.value)


def test_vocabulary_names_disagreeing_with_the_package_are_refused(emoji_cache):
    write_all()
    pkg = BY_STYLE["openmoji"]
    rows = ["emoji,hexcode,group,subgroups,annotation,tags"]
    rows += [f"x,{e.openmoji_code},g,s,{'renamed' if i == 0 else e.name},t" for i, e in enumerate(VOCAB)]
    write_tarball(pkg, replace={"data/openmoji.csv": "\n".join(rows).encode()})
    with pytest.raises(EmojiDataError, match=VOCAB[0].name):
        bank_mod.build_bank()


def test_vocabulary_is_large_enough_and_unambiguous():
    names = [e.name for e in VOCAB]
    assert len(VOCAB) >= 24 and len(set(names)) == len(names)
    assert len({e.code for e in VOCAB}) == len(VOCAB)
    assert all(e.color in e.name for e in VOCAB if e.color)
