"""``load_synthesizer``: pick and load a backend."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from .base import BackendUnavailableError, Engine, Synthesizer

log = logging.getLogger(__name__)

BACKENDS = ("auto", "onnx", "torch")


def load_synthesizer(
    backend: str = "auto",
    model_dir: str | None = None,
    cache_dir: str | None = None,
    threads: int | None = None,
    voices_dir: str | None = None,
    spin: bool = False,
) -> Synthesizer:
    """Load a synthesizer; blocking (seconds; a first torch load may convert weights).

    ``backend``: ``onnx`` (int8 ONNX on the CPU), ``torch`` (hexgrad's KModel, on CUDA when
    available), or ``auto``: torch when torch is importable and CUDA is available, else onnx
    (also, with a warning, when the torch backend cannot load on a CUDA machine).
    ``model_dir``: a Kokoro-82M hub folder (config.json, kokoro-v1_0.pth, voices/): its voices
    are added, and torch loads its weights. ``cache_dir``: where the assembled ONNX and the
    converted torch weights live (default ``~/.cache/streamtts``). ``threads``: CPU threads
    for inference (default: the cores available). ``voices_dir``: a folder of more voice packs
    (``<id>.bin``), read before ``model_dir``'s. ``spin``: onnx's threads spin-wait after a run
    (off: they would hold the cores the encoder and the append need next; torch ignores it).

    Raises ``BackendUnavailableError`` saying what to install or set.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    loaded: tuple[Engine, Mapping[str, int]] | None = None
    if backend == "torch" or (backend == "auto" and cuda_available()):
        from .torch_backend import torch_engine

        try:
            loaded = torch_engine(model_dir=model_dir, cache_dir=cache_dir, threads=threads)
        except BackendUnavailableError as e:
            if backend == "torch":
                raise
            log.warning("CUDA is available but the torch backend is not (%s): using onnx on the CPU", e)
    # Imported here: the G2P (misaki) loads with the model, not with every import of synth.model.
    from .assets import onnx_model_path, onnx_vocab
    from .onnx_backend import OnnxEngine
    from .pipeline import KokoroSynthesizer
    from .voices import load_voices

    if loaded is None:
        loaded = OnnxEngine(onnx_model_path(cache_dir), threads, spin), onnx_vocab()
    engine, vocab = loaded
    return KokoroSynthesizer(engine, load_voices(model_dir, voices_dir), vocab)


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())
