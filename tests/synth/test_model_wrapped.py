"""``Wrapped`` (bench/modelwrap.py), the seam of tests and benchmarks, runs the path production
runs: it forwards every public method of the real synthesizer, ``synthesize_timed`` (the worker's call)
included, so a wrapped model in the failure tests and the benchmarks is timed as in production."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
from modelwrap import Wrapped

from synth.dispatcher import infer
from synth.model.pipeline import KokoroSynthesizer


def public_methods(cls: type) -> set[str]:
    return {name for name, value in inspect.getmembers(cls, inspect.isfunction) if not name.startswith("_")}


class Recorder:
    """Stands for the real synthesizer: records which method was called with what."""

    name = "recorder"

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def __getattr__(self, method: str) -> Any:
        def call(*args: Any) -> Any:
            self.calls.append((method, args))
            if method == "synthesize_timed":
                return np.zeros(24, dtype=np.float32), [("hi", 0, 1)]
            return np.zeros(24, dtype=np.float32) if method.startswith("synthesize") else "x"
        return call


def test_wrapped_forwards_every_public_method_of_the_real_synthesizer() -> None:
    missing = public_methods(KokoroSynthesizer) - set(vars(Wrapped))
    assert not missing, f"Wrapped does not forward {sorted(missing)}"


def test_each_forwarded_method_reaches_the_real_one_with_its_arguments() -> None:
    real = Recorder()
    wrapped = Wrapped(real)  # type: ignore[arg-type]
    for method in sorted(public_methods(KokoroSynthesizer)):
        params = list(inspect.signature(getattr(KokoroSynthesizer, method)).parameters)[1:]
        args = tuple(f"arg-{p}" for p in params)
        real.calls.clear()
        getattr(wrapped, method)(*args)
        assert real.calls == [(method, args)], method


def test_the_worker_takes_the_timed_path_through_a_wrapper() -> None:
    real = Recorder()
    pcm, words = infer(Wrapped(real), "Hi.", "af_heart")  # type: ignore[arg-type]
    assert [c[0] for c in real.calls] == ["synthesize_timed"]
    assert words == [("hi", 0, 1)] and len(pcm) == 24
