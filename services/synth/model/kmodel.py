"""hexgrad's KModel (the ``kokoro`` package), imported and built without any download.

KModel downloads its config and weights from the hub unless both are given: we always give
both. ``import kokoro`` also imports its KPipeline, which needs spaCy and phonemizer that we
do not use; without them, the ``kokoro.model`` module is loaded on its own.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .base import BackendUnavailableError
from .quiet import quiet_known_warnings

HUB_REPO = "hexgrad/Kokoro-82M"  # only a label here: config and weights are always passed in
_INSTALL_HINT = (
    "the torch backend needs torch and hexgrad's kokoro: pip install torch==2.13.0 (or a CUDA "
    "build) && pip install --no-deps kokoro==0.9.4 && pip install loguru transformers huggingface-hub"
)

# Kokoro-82M v1.0's config.json, less the vocab (that comes with the model files).
KOKORO_V1_CONFIG: dict[str, Any] = {
    "istftnet": {
        "upsample_kernel_sizes": [20, 12], "upsample_rates": [10, 6], "gen_istft_hop_size": 5,
        "gen_istft_n_fft": 20, "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],
        "resblock_kernel_sizes": [3, 7, 11], "upsample_initial_channel": 512,
    },
    "dim_in": 64, "dropout": 0.2, "hidden_dim": 512, "max_conv_dim": 512, "max_dur": 50,
    "multispeaker": True, "n_layer": 3, "n_mels": 80, "n_token": 178, "style_dim": 128,
    "text_encoder_kernel_size": 5,
    "plbert": {
        "hidden_size": 768, "num_attention_heads": 12, "intermediate_size": 2048,
        "max_position_embeddings": 512, "num_hidden_layers": 12, "dropout": 0.1,
    },
}
# The parts of a KModel that its weights file holds, one state dict each.
COMPONENTS = ("bert", "bert_encoder", "predictor", "text_encoder", "decoder")


def kmodel_class() -> Any:
    """``kokoro.model.KModel``, importable without spaCy or phonemizer."""
    try:
        import torch  # noqa: F401
    except ImportError as e:
        raise BackendUnavailableError(_INSTALL_HINT) from e
    try:
        from kokoro.model import KModel
    except ModuleNotFoundError as e:
        if e.name not in ("spacy", "phonemizer", "misaki", "kokoro"):
            raise BackendUnavailableError(f"{_INSTALL_HINT} (missing: {e.name})") from e
        if e.name == "kokoro":
            raise BackendUnavailableError(_INSTALL_HINT) from e
        KModel = _kmodel_without_pipeline()
    return KModel


def _kmodel_without_pipeline() -> Any:
    spec = importlib.util.find_spec("kokoro")
    if spec is None or not spec.submodule_search_locations:
        raise BackendUnavailableError(_INSTALL_HINT)
    # A bare package object: ``kokoro.model`` and its siblings import as usual, while
    # kokoro/__init__.py (KPipeline, spaCy, phonemizer) never runs.
    package = types.ModuleType("kokoro")
    package.__path__ = list(spec.submodule_search_locations)
    package.__spec__ = spec
    sys.modules["kokoro"] = package
    try:
        with quiet_known_warnings():
            module = importlib.import_module("kokoro.model")
    except ImportError as e:
        del sys.modules["kokoro"]
        raise BackendUnavailableError(f"{_INSTALL_HINT} ({e})") from e
    # kokoro/__init__.py silences its loguru debug lines (one per inference); so do we.
    from loguru import logger

    logger.disable("kokoro")
    return module.KModel


def build_kmodel(config: Mapping[str, Any], weights: str | Path) -> Any:
    """A KModel on the CPU in eval mode, from a config dict and a weights file."""
    KModel = kmodel_class()
    with quiet_known_warnings():
        model = KModel(repo_id=HUB_REPO, config=dict(config), model=str(weights))
    return model.eval()
