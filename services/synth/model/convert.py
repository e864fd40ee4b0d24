"""Rebuild KModel weights from the int8 ONNX, once, for the torch backend without a hub folder.

Every ONNX initializer is placed by its name (``encoder.predictor.F0_proj.bias``) or, when the
exporter renamed it (``onnx::MatMul_6547``, ``/encoder/F0.0/Mul_output_0``), by the module
path of the node that consumes it. Quantized weights are dequantized ((q - zero) x scale);
MatMul weights are stored transposed; LSTM gates come in ONNX order (i, o, f, c) and go out
in torch order (i, f, c, o); convolutions that KModel weight-normalizes were folded into one
tensor W by the export and are stored as v = W, g = ||W|| (an all-zero channel: v = 1, g = 0).

The result is a ``kokoro-v1_0.pth``-style file ({component: state_dict}) with a SHA-256
sidecar that also names the ONNX it came from, so a changed model is converted again.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
import time
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .assets import file_sha256
from .base import BackendUnavailableError
from .kmodel import COMPONENTS, KOKORO_V1_CONFIG, build_kmodel

log = logging.getLogger(__name__)

CONVERTED_NAME = "kokoro-v1_0.from-int8.pth"
CHECKSUM_SUFFIX = ".sha256"
PROGRESS_STEPS = 10
# Top-level scopes the exporter used for KModel's parts ("/encoder/F0.0" is predictor.F0.0).
_ENCODER_PARTS = ("bert", "bert_encoder", "text_encoder", "predictor")
_REPEAT_SUFFIX = re.compile(r"_\d+$")  # "query_1": the second call of a shared ALBERT layer
_LSTM_INPUTS = {1: "weight_ih_l0", 2: "weight_hh_l0"}  # DynamicQuantizeLSTM input -> torch name
_LSTM_SCALE_ZERO = {1: (8, 9), 2: (10, 11)}

Array = npt.NDArray[np.float32]


def converted_weights(onnx_path: Path, cache_dir: Path, vocab: Mapping[str, int]) -> Path:
    """The converted weights in ``cache_dir``, converting first when missing or stale."""
    out = cache_dir / CONVERTED_NAME
    source = file_sha256(onnx_path)
    if _checksum_ok(out, source):
        return out
    cache_dir.mkdir(parents=True, exist_ok=True)
    convert(onnx_path, out, vocab)
    (out.parent / (out.name + CHECKSUM_SUFFIX)).write_text(f"{file_sha256(out)}  {out.name}\n{source}  source\n")
    return out


def convert(onnx_path: Path, out: Path, vocab: Mapping[str, int]) -> None:
    """Write KModel weights rebuilt from the int8 ONNX at ``onnx_path`` to ``out``."""
    try:
        import onnx
        import torch
        from onnx import numpy_helper
    except ImportError as e:
        raise BackendUnavailableError(
            "converting the int8 ONNX to torch weights needs onnx: pip install onnx "
            "(or give model_dir a Kokoro-82M hub folder)"
        ) from e
    started = time.perf_counter()
    log.info("converting %s to KModel weights (once; cached in %s)", onnx_path.name, out.parent)
    graph = onnx.load(str(onnx_path)).graph
    arrays = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    model = _skeleton(vocab)
    mapper = _Mapper(arrays, graph.node, dict(model.named_modules()), model.state_dict())
    names = list(arrays)
    for i, name in enumerate(names, 1):
        mapper.place(name)
        if i % max(1, len(names) // PROGRESS_STEPS) == 0:
            log.info("converting: %d%% (%d/%d initializers)", 100 * i // len(names), i, len(names))
    state = mapper.complete_state()
    model.load_state_dict({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in state.items()}, strict=True)
    tmp = out.with_suffix(f".tmp{os.getpid()}")
    try:
        torch.save({part: getattr(model, part).state_dict() for part in COMPONENTS}, tmp)
        tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)
    log.info("converted %d tensors to %s in %.1f s", len(state), out, time.perf_counter() - started)


def _skeleton(vocab: Mapping[str, int]) -> Any:
    """A KModel with its initial (random) weights: it gives the target names and shapes."""
    import torch

    with tempfile.TemporaryDirectory() as folder:
        empty = Path(folder) / "empty.pth"
        torch.save({}, empty)  # KModel loads each component found in the file: none
        return build_kmodel({**KOKORO_V1_CONFIG, "vocab": dict(vocab)}, empty)


class _Mapper:
    """Places ONNX initializers into a KModel state dict."""

    def __init__(self, arrays: dict[str, Any], nodes: Any, modules: dict[str, Any], target: Mapping[str, Any]) -> None:
        self.arrays = arrays
        self.modules = modules
        self.target = {k: tuple(v.shape) for k, v in target.items()}
        self.state: dict[str, Array] = {}
        self.consumers: dict[str, list[tuple[Any, int]]] = defaultdict(list)
        for node in nodes:
            for index, name in enumerate(node.input):
                self.consumers[name].append((node, index))

    def place(self, name: str) -> None:
        uses = self.consumers.get(name, [])
        node, index = uses[0] if uses else (None, -1)
        if name.endswith("_quantized") and node is not None:
            self._place_quantized(name, node, index)
        elif node is not None and node.op_type == "DynamicQuantizeLSTM" and index == 3:
            self._place_lstm_bias(name, node)
        elif _torch_name(name) in self.target:
            self._put(_torch_name(name) or "", self.arrays[name].astype(np.float32))
        elif node is not None and index == 1 and node.op_type in ("Conv", "ConvTranspose", "MatMul"):
            module = self._find_module(node.name)
            if module is None:  # the export's own STFT basis: TorchSTFT computes it
                log.debug("skipping %s (no KModel module for %s)", name, node.name)
            elif node.op_type == "MatMul":
                self._put(module + ".weight", self.arrays[name].astype(np.float32).T)
            else:
                self._put_conv(module, self.arrays[name].astype(np.float32))
        # Anything else is a shape, a constant or a precomputed value (1 / alpha): not a weight.

    def _place_quantized(self, name: str, node: Any, index: int) -> None:
        base = name[: -len("_quantized")]
        quantized = self.arrays[name].astype(np.float32)
        if node.op_type == "DynamicQuantizeLSTM":
            scale_at, zero_at = _LSTM_SCALE_ZERO[index]
            scale = self.arrays[node.input[scale_at]].reshape(-1, 1, 1)
            zero = self.arrays[node.input[zero_at]].astype(np.float32).reshape(-1, 1, 1)
            self._put_lstm(self._module(node.name), _LSTM_INPUTS[index], (quantized - zero) * scale)
            return
        scale = self.arrays[base + "_scale"]
        weight = (quantized - self._zero_point(base, node).astype(np.float32)) * scale
        if node.op_type == "Gather":
            self._put(_torch_name(base) or "", weight)
        elif node.op_type == "MatMulInteger":
            self._put(_torch_name(base) or self._module(node.name) + ".weight", weight.T)
        elif node.op_type == "ConvInteger":
            self._put_conv(self._module(node.name), weight)
        else:
            raise ValueError(f"{name}: unexpected quantized use by {node.op_type}")

    def _zero_point(self, base: str, node: Any) -> Any:
        """Identical zero points were merged by the exporter: read the one the node uses."""
        if base + "_zero_point" in self.arrays:
            return self.arrays[base + "_zero_point"]
        if node.op_type in ("MatMulInteger", "ConvInteger"):
            return self.arrays[node.input[3]]
        dequantize = self.consumers[node.output[0]][0][0]  # Gather -> DequantizeLinear
        return self.arrays[dequantize.input[2]]

    def _place_lstm_bias(self, name: str, node: Any) -> None:
        module = self._module(node.name)
        bias = self.arrays[name].astype(np.float32)  # (directions, 8 x hidden): input, then recurrent
        for direction, suffix in enumerate(("", "_reverse")):
            input_bias, recurrent_bias = np.split(bias[direction], 2)
            self._put(f"{module}.bias_ih_l0{suffix}", _torch_gates(input_bias))
            self._put(f"{module}.bias_hh_l0{suffix}", _torch_gates(recurrent_bias))

    def _put_lstm(self, module: str, key: str, weight: Array) -> None:
        # DynamicQuantizeLSTM keeps W as (directions, input, 4 x hidden): transposed.
        for direction, suffix in enumerate(("", "_reverse")):
            self._put(f"{module}.{key}{suffix}", _torch_gates(weight[direction].T))

    def _put_conv(self, module: str, weight: Array) -> None:
        if module + ".weight_v" not in self.target:
            self._put(module + ".weight", weight)
            return
        # weight_norm (dim 0): W = g * v / ||v||, norms over every axis but the first.
        norm = np.sqrt(np.sum(np.square(weight, dtype=np.float64), axis=tuple(range(1, weight.ndim)), keepdims=True))
        dead = norm.reshape(-1) == 0
        v = weight.copy()
        v[dead] = 1.0
        self._put(module + ".weight_v", v)
        self._put(module + ".weight_g", norm.astype(np.float32))

    def _put(self, key: str, value: Array) -> None:
        if key not in self.target:
            raise ValueError(f"the ONNX maps to {key!r}, which KModel does not have")
        if key in self.state:
            raise ValueError(f"{key!r} placed twice")
        shape = self.target[key]
        if value.shape != shape:
            if value.size != int(np.prod(shape)):
                raise ValueError(f"{key}: shape {value.shape} from the ONNX, {shape} in KModel")
            value = value.reshape(shape)
        self.state[key] = value.astype(np.float32, copy=False)

    def _module(self, node_name: str) -> str:
        module = self._find_module(node_name)
        if module is None:
            raise ValueError(f"no KModel module for the ONNX node {node_name!r}")
        return module

    def _find_module(self, node_name: str) -> str | None:
        """ONNX node scope -> KModel module path ("/encoder/F0.1/pool/ConvTranspose" ->
        "predictor.F0.1.pool")."""
        parts = node_name.strip("/").split("/")[:-1]
        if parts[0] == "encoder":
            parts = parts[1:] if parts[1] in _ENCODER_PARTS else ["predictor", *parts[1:]]
        elif parts[:2] == ["decoder", "decoder"]:
            parts = ["decoder", *parts[2:]]
        path: list[str] = []
        for part in parts:
            if path and part.startswith(path[-1] + "."):  # "cnn.0/cnn.0.0": a child's full name
                path[-1] = part
            else:
                path.append(part)
        name = ".".join(path)
        if name not in self.modules:
            name = ".".join(_REPEAT_SUFFIX.sub("", p) for p in path)
        return name if name in self.modules else None

    def complete_state(self) -> dict[str, Array]:
        """Fill what the ONNX cannot hold: ALBERT's pooler (Kokoro never uses it) and the
        InstanceNorm affine pairs that the export dropped as identities."""
        for key, shape in self.target.items():
            if key in self.state:
                continue
            module, _, param = key.rpartition(".")
            kind = type(self.modules.get(module)).__name__
            if key.startswith("bert.pooler.") or kind.startswith("InstanceNorm"):
                self.state[key] = (np.ones if param == "weight" else np.zeros)(shape, dtype=np.float32)
        missing = sorted(set(self.target) - set(self.state))
        if missing:
            raise ValueError(f"the ONNX gave no value for {len(missing)} KModel tensors: {missing[:5]}")
        return self.state


def _torch_name(onnx_name: str) -> str | None:
    """Initializers that kept their torch name carry the exporter's wrapper prefix."""
    if onnx_name.startswith("encoder."):
        return onnx_name[len("encoder."):]
    if onnx_name.startswith("decoder.decoder."):
        return "decoder." + onnx_name[len("decoder.decoder."):]
    return None


def _torch_gates(rows: Array) -> Array:
    """ONNX LSTM gate blocks (i, o, f, c) -> torch's (i, f, c, o), along the first axis."""
    i, o, f, c = np.split(rows, 4, axis=0)
    return np.concatenate([i, f, c, o], axis=0)


def _checksum_ok(path: Path, source: str) -> bool:
    sidecar = path.parent / (path.name + CHECKSUM_SUFFIX)
    if not path.is_file() or not sidecar.is_file():
        return False
    lines = sidecar.read_text().split("\n")
    return len(lines) >= 2 and lines[0].split()[0] == file_sha256(path) and lines[1].split()[0] == source
