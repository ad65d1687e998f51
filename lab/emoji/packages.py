"""The emoji artwork packages: pinned npm tarballs kept in a cache outside the repository.

Three styles of the same pictures, each from its npm package at one pinned version:
Noto Emoji (`emoji-datasource-google`, artwork Apache-2.0), Twemoji (`emoji-datasource-twitter`,
artwork CC-BY-4.0) and OpenMoji (`openmoji`, CC-BY-SA-4.0). Apple's and Facebook's sets are not
free to use and are never read. `npm pack` fetches each tarball into the cache (nothing is
extracted, nothing enters the repository); readers open members straight from the tarball.
The cache is ``$LADR_EMOJI_CACHE`` or ``~/.cache/comfyui-ladr/emoji``.
"""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

INSTALL_COMMAND = "python -m lab.emoji.build install"


class EmojiDataError(RuntimeError):
    """A missing, wrong or corrupt piece of the emoji data, with the command that fixes it."""


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    style: str            # the style name used everywhere else
    artwork_license: str


PACKAGES: tuple[Package, ...] = (
    Package("emoji-datasource-google", "16.0.0", "noto", "Apache-2.0"),
    Package("emoji-datasource-twitter", "16.0.0", "twemoji", "CC-BY-4.0"),
    Package("openmoji", "17.0.0", "openmoji", "CC-BY-SA-4.0"),
)
BY_STYLE = {p.style: p for p in PACKAGES}


def cache_dir() -> Path:
    return Path(os.environ.get("LADR_EMOJI_CACHE", Path.home() / ".cache" / "comfyui-ladr" / "emoji"))


def tarball_path(pkg: Package) -> Path:
    return cache_dir() / "npm" / f"{pkg.name}-{pkg.version}.tgz"


def _npm_pack(pkg: Package, dest: Path) -> Path:
    """`npm pack name@version` into `dest`; the one clear error when npm or the registry fails."""
    spec = f"{pkg.name}@{pkg.version}"
    try:
        out = subprocess.run(["npm", "pack", spec, "--json", "--pack-destination", str(dest)],
                             capture_output=True, text=True, timeout=900, check=False)
    except FileNotFoundError as exc:
        raise EmojiDataError(f"npm is not installed, so {spec} cannot be fetched: install Node.js "
                             f"(apt-get install -y npm), then run `{INSTALL_COMMAND}`") from exc
    if out.returncode != 0:
        tail = (out.stderr or out.stdout).strip().splitlines()[-3:]
        raise EmojiDataError(f"npm could not fetch {spec} (no network or no such version?): "
                             f"{' | '.join(tail)}; when the npm registry is reachable run "
                             f"`{INSTALL_COMMAND}`")
    return dest / json.loads(out.stdout)[0]["filename"]


def install(force: bool = False) -> list[Path]:
    """Fetch every pinned tarball that is missing (or all with `force`); a download lands in a
    temporary file renamed into place only once it is checked, so a cut download is never used."""
    done = []
    for pkg in PACKAGES:
        final = tarball_path(pkg)
        if final.is_file() and not force:
            check_tarball(pkg)
            done.append(final)
            continue
        final.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=final.parent) as tmp:
            got = _npm_pack(pkg, Path(tmp))
            _check_version(pkg, got)
            os.replace(got, final)
        print(f"installed {pkg.name} {pkg.version} -> {final}", flush=True)
        done.append(final)
    return done


def _check_version(pkg: Package, path: Path) -> None:
    try:
        with tarfile.open(path) as tar:
            meta = json.loads(tar.extractfile("package/package.json").read())
    except (tarfile.TarError, OSError, KeyError, json.JSONDecodeError, EOFError) as exc:
        raise EmojiDataError(f"{path} is not a readable {pkg.name} tarball ({exc}): run "
                             f"`{INSTALL_COMMAND} --force`") from exc
    if meta.get("name") != pkg.name or meta.get("version") != pkg.version:
        raise EmojiDataError(f"{path} holds {meta.get('name')} {meta.get('version')}, not the pinned "
                             f"{pkg.name} {pkg.version}: run `{INSTALL_COMMAND} --force`")


def check_tarball(pkg: Package) -> Path:
    """The tarball of `pkg`, present and of the pinned version, else one error with the fix."""
    path = tarball_path(pkg)
    if not path.is_file():
        raise EmojiDataError(f"{pkg.name} {pkg.version} is not installed (no {path}): run "
                             f"`{INSTALL_COMMAND}`")
    _check_version(pkg, path)
    return path


class Reader:
    """Members of one package's tarball by their path inside the package."""

    def __init__(self, pkg: Package) -> None:
        self.pkg = pkg
        self.path = check_tarball(pkg)
        self._tar = tarfile.open(self.path)  # noqa: SIM115 (closed by close() / __exit__)

    def read(self, member: str) -> bytes:
        try:
            return self._tar.extractfile(f"package/{member}").read()
        except (KeyError, AttributeError, tarfile.TarError, OSError, EOFError) as exc:
            raise EmojiDataError(f"{member} is missing or unreadable in {self.path} "
                                 f"({self.pkg.name} {self.pkg.version}): run "
                                 f"`{INSTALL_COMMAND} --force`") from exc

    def text(self, member: str) -> str:
        return self.read(member).decode("utf-8")

    def close(self) -> None:
        self._tar.close()

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

