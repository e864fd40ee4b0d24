"""The torch backend: hexgrad's KModel, the production engine on CUDA (also runs on the CPU).

Weights come from ``model_dir`` (the hub layout) when it holds them, else from the int8 ONNX,
converted once into ``cache_dir`` (``convert.py``). Either way nothing is downloaded.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .assets import HUB_WEIGHTS, hub_config, onnx_model_path, onnx_vocab
from .base import Audio, Durations
from .convert import converted_weights
from .kmodel import KOKORO_V1_CONFIG, build_kmodel, kmodel_class
from .onnx_backend import available_cores

log = logging.getLogger(__name__)


class TorchEngine:
    """Token ids -> audio through one KModel, on CUDA when available."""

    def __init__(self, model: Any, device: str) -> None:
        self.name = f"torch-{device}"
        self.device = device
        self._model = model.to(device)

    def infer(self, token_ids: list[int], style: npt.NDArray[np.float32], speed: float) -> tuple[Audio, Durations]:
        """The audio and KModel's ``pred_dur``: each token's frames of 600 samples, pads included."""
        import torch

        with torch.inference_mode():
            ids = torch.tensor([[0, *token_ids, 0]], dtype=torch.long, device=self.device)
            ref = torch.from_numpy(np.ascontiguousarray(style, dtype=np.float32)).reshape(1, -1).to(self.device)
            audio, pred_dur = self._model.forward_with_tokens(ids, ref, speed)
        durations = np.asarray(pred_dur.cpu().numpy(), dtype=np.int64).ravel()
        return np.asarray(audio.float().cpu().numpy(), dtype=np.float32).ravel(), durations


def torch_engine(
    model_dir: str | None = None, cache_dir: str | None = None, threads: int | None = None
) -> tuple[TorchEngine, dict[str, int]]:
    """KModel with the hub weights in ``model_dir``, or with weights rebuilt from the ONNX; and
    its vocabulary."""
    kmodel_class()  # fail fast, before any conversion, when torch or kokoro is missing
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        torch.set_num_threads(threads or available_cores())
    if model_dir is not None and (Path(model_dir) / HUB_WEIGHTS).is_file():
        config = hub_config(model_dir)
        weights = Path(model_dir) / HUB_WEIGHTS
    else:  # no hub weights (model_dir may hold only voices/, as `streamtts voices install` makes it)
        vocab = onnx_vocab()
        config = {**KOKORO_V1_CONFIG, "vocab": vocab}
        onnx_model = onnx_model_path(cache_dir)  # the converted weights are cached beside it
        weights = converted_weights(onnx_model, onnx_model.parent, vocab)
    log.info("torch backend on %s, weights from %s", device, weights)
    return TorchEngine(build_kmodel(config, weights), device), config["vocab"]
