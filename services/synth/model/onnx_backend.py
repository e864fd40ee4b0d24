"""The onnxruntime backend: the int8 Kokoro-82M ONNX on the CPU (priority 1, always works)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
import numpy.typing as npt

from .base import Audio, BackendUnavailableError, Durations

log = logging.getLogger(__name__)

# The export's output is 1.5x louder than the reference model's.
ONNX_GAIN = 1 / 1.5
# Inside the graph: the predicted duration of every token (int64 frames of 600 samples, the pads
# included), made a second output at load time so that words get their times (timing.py). The
# model is always the packaged one (its SHA-256 is checked), which has it.
DURATIONS_TENSOR = "/encoder/Cast_output_0"


class OnnxEngine:
    """Token ids -> audio through one onnxruntime session (thread-safe for ``run``)."""

    name = "onnx"

    def __init__(self, model_path: str | Path, threads: int | None = None, spin: bool = False) -> None:
        try:
            import onnx
            import onnxruntime as ort
        except ImportError as e:
            raise BackendUnavailableError("the onnx backend needs onnxruntime and onnx: "
                                          "pip install onnxruntime onnx") from e
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or available_cores()
        # One chunk at a time: parallelism lives inside the ops, not across them.
        options.inter_op_num_threads = 1
        # Threads that spin-wait after a run hold the cores the first chunk's encoding and append
        # need next (and edge's delivery on one box): measured on 2 shared cores, the encoding
        # right after a run took 0.5-0.8x the time without spinning, the model itself 0.7-0.9x.
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
        log.info("onnx backend: %d inference threads", options.intra_op_num_threads)
        model = onnx.load(str(model_path))
        model.graph.output.append(onnx.helper.make_tensor_value_info(DURATIONS_TENSOR, onnx.TensorProto.INT64, None))
        self._session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])

    def infer(self, token_ids: list[int], style: npt.NDArray[np.float32], speed: float) -> tuple[Audio, Durations]:
        audio, durations = self._session.run(None, {
            "tokens": np.array([[0, *token_ids, 0]], dtype=np.int64),
            "style": np.asarray(style, dtype=np.float32).reshape(1, -1),
            "speed": np.array([speed], dtype=np.float32),
        })
        pcm = (np.asarray(audio, dtype=np.float32).ravel() * ONNX_GAIN).astype(np.float32, copy=False)
        return pcm, np.asarray(durations, dtype=np.int64).ravel()


def available_cores() -> int:
    """Cores this process may run on (a container's CPU set, not the host's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)

