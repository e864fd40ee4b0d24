"""bench/bench_ramp.py: the worker's own admission, schedule and ramp on a simulated clock and a
model with a fixed cost a reading (#37). On this machine's fit the rule before (each chunk cut to
fit the lead) fell to its floor and stalled; ramp_cut keeps every listener within 2 s."""

from __future__ import annotations

import pytest
from bench_ramp import LONG, PARAGRAPH, fit_the_lead, ramp, simulate

ONNX_HERE = (0.53, 0.0232)  # seconds a reading, seconds a character read: onnx on this CPU


@pytest.mark.parametrize(("text", "casts"), [(PARAGRAPH, 1), (PARAGRAPH, 5), (LONG, 1)])
def test_on_a_model_with_a_fixed_cost_the_ramp_keeps_listeners_within_two_seconds(text: str, casts: int) -> None:
    now = [max(h.stall_s() for h in simulate(ramp, text, casts, *ONNX_HERE, seed)) for seed in range(2)]
    before = [max(h.stall_s() for h in simulate(fit_the_lead, text, casts, *ONNX_HERE, seed)) for seed in range(2)]
    assert max(now) <= 2.0, now
    assert min(before) > 2 * max(now), (before, now)  # the fall the rule before met, side by side


def test_on_a_gpu_nobody_stalls_and_sentences_go_whole() -> None:
    listeners = simulate(ramp, PARAGRAPH, 5, 0.02, 0.0005, seed=0)
    assert all(h.stall_s() == 0.0 for h in listeners)
    assert all(len(h.records) == len(listeners[0].records) for h in listeners)
