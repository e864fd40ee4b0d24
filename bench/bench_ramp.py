"""The ramp on a simulated worker: how long listeners stall, side by side for two rules, on
models from a GPU to a CPU at real time (#37).

A simulated clock and a stand-in model, but the worker's own policy: admission within the
measured capacity (synth.capacity), lowest lead first (synth.scheduler.pick), the ramp, the
splitter and the seams' reading of a chunk cut inside a sentence (synth.seams: its neighbours'
words read with it). The model takes ``fixed`` seconds a reading plus ``per_char`` a character it
reads (onnx on this CPU: about 0.53 s and 23 ms, least squares over 24 texts of 15 to 310
characters; the fixed part is the audio of its padding), and makes ``AUDIO_S_PER_CHAR`` of
audio a character it keeps, plus ``EDGE_PAD_S`` at each end of a sentence. Each reading takes a
little more or less (``NOISE``, seeded).

The two rules for a chunk after the first, when the listener's buffer is thin:

- ``fit the lead`` (the rule before): the longest head the model reads within the lead, at its
  measured seconds a character read, never shorter than RAMP_MIN_CHARS;
- ``ramp_cut`` (now): every way to make the sentence in pieces weighed by the stall and what is
  buffered after it, the model's fixed cost a reading included.

Casts arrive together (``--casts``, default 1 and 5) with one listener each from its first
audio; a listener's stall is the time its playhead waits for audio not there yet, in all. The
figures are the worst listener's, over ``--seeds`` runs. ``--measure`` fits ``fixed`` and
``per_char`` to the real model here first (a minute) and adds that profile.

    python bench/bench_ramp.py [--seeds 3] [--measure]
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from chunking import split_text
from chunking.cuts import cut_head
from synth import capacity, seams
from synth.cast import ActiveCast, Assignment
from synth.config import SynthConfig
from synth.scheduler import RAMP_MIN_CHARS, ModelSpeed, pick, ramp_cut

from common import RESULTS, arguments, machine, print_rows, repo_text, write_results

AUDIO_S_PER_CHAR = 0.055  # the real model's audio a character kept (af_heart, this paragraph)
EDGE_PAD_S = 0.3  # the silence it makes at each end of a text it reads whole
NOISE = 0.08  # each reading up to this share longer or shorter
LOOKAHEAD_CHARS = 12  # the rule before: the words ahead it allowed for a chunk cut inside a sentence
PARAGRAPH = repo_text("paragraph").strip()
LONG = " ".join(
    ["When the storm finally passed over the valley, the farmers walked out to see."]
    + ["The old lighthouse keeper climbed the winding stairs every evening at dusk to light the lamp that "
       "guided the fishing boats safely home across the dark and restless water."] * 4)
OPENINGS = ("First", "Second", "Third", "Fourth", "Fifth")
# (name, fixed seconds a reading, seconds a character read)
PROFILES = [
    ("GPU", 0.02, 0.0005),
    ("CPU, this machine's onnx", 0.53, 0.0232),
    ("CPU, slower (RTF 0.8)", 0.8, 0.035),
    ("CPU at real time", 1.0, 0.045),
    ("no fixed cost, RTF 0.8", 0.0, 0.045),
]


class Timed:
    """What seams.read_text asks of a model: it times its words (so a cut chunk reads its neighbours')."""

    def synthesize_timed(self) -> None: ...


READ = partial(seams.read_text, Timed())
Rule = Callable[[ActiveCast, ModelSpeed, float, dict[str, float]], "str | None"]


def ramp(cast: ActiveCast, speed: ModelSpeed, now: float, _: dict[str, float]) -> str | None:
    cut = ramp_cut(speed, cast.pace, now, cast.whole_cut(READ), partial(cast.cuts, READ))
    return None if cut is None else cast.heads()[cut]


def fit_the_lead(cast: ActiveCast, speed: ModelSpeed, now: float, seen: dict[str, float]) -> str | None:
    """The rule before #37's fix: the lead over the smoothed seconds a character read, less the
    neighbours' words, at least RAMP_MIN_CHARS."""
    if cast.pace.first_audio_at is None or not seen.get("s_per_char"):
        return None
    behind = cast.context(cast.next_synth)[0]
    context = (len(behind) + 1 if behind else 0) + LOOKAHEAD_CHARS
    limit = max(RAMP_MIN_CHARS, int(max(0.0, cast.pace.lead(now)) / seen["s_per_char"] - context))
    chunk = cast.chunks[cast.next_synth]
    return None if len(chunk) <= limit else cut_head(chunk, limit)[0]


RULES: dict[str, Rule] = {"fit the lead (before)": fit_the_lead, "ramp_cut (now)": ramp}


@dataclass
class Listener:
    records: list[tuple[float, float]]  # (when appended, seconds of audio)

    def stall_s(self) -> float:
        playhead, waited = self.records[0][0], 0.0
        for there, seconds in self.records:
            if there > playhead:
                waited, playhead = waited + there - playhead, there
            playhead += seconds
        return waited


def simulate(rule: Rule, text: str, casts: int, fixed: float, per_char: float, seed: int) -> list[Listener]:
    """``casts`` casts of ``text`` (each with its own opening) through one simulated worker."""
    rnd, cfg = random.Random(seed), SynthConfig.from_env({})
    waiting = []
    for k, opening in enumerate(OPENINGS[:casts]):
        chunks = split_text(f"{opening} part. {text}")
        job = Assignment(entry_id=f"{k + 1}-0", cast_id=f"{k:012d}", enqueued_at=0, deliveries=1)
        waiting.append(ActiveCast(job=job, voice="af_heart", chunks=chunks, continued=[False] * len(chunks),
                                  attempt=1, job_attempt=1, resume_from=0, tail=1, offset_ms=0, first_audio_ts=None))
    heard: dict[str, Listener] = {c.cast_id: Listener([]) for c in waiting}
    active: list[ActiveCast] = []
    speed, now, seen = ModelSpeed(), 0.0, {"s_per_char": 0.0}
    while waiting or active:
        needs = capacity.needs_of(active, speed, now)
        room = capacity.room(needs, capacity.known_capacity(speed, cfg.capacity_measure_s), cfg.admit_headroom)
        while room > 0 and waiting:
            cast = waiting.pop(0)
            cast.pace = cast.pace.admitted(now)
            active.append(cast)
            room -= 1
        listeners = sum(1 for c in active if c.wants_chunk)
        cast = pick(active, now, first_chunk_s=speed.first_chunk_s(listeners)).cast
        assert cast is not None
        index, chunk = cast.take_chunk(rule(cast, speed, now, seen))
        behind, ahead = cast.context(index)
        read = READ(chunk, ahead, behind)
        took = (fixed + per_char * len(read)) * (1 + rnd.uniform(-NOISE, NOISE))
        audio = AUDIO_S_PER_CHAR * len(chunk) + EDGE_PAD_S * (not behind) + EDGE_PAD_S * (not ahead)
        now += took
        speed.observe(took, len(chunk), audio, read_chars=len(read))
        old = seen["s_per_char"]  # the rule before: its smoothed measure
        seen["s_per_char"] = took / len(read) if old == 0 else old + 0.25 * (took / len(read) - old)
        cast.pace = cast.pace.made(round(audio * 1000), now).appended(round(audio * 1000), now)
        cast.next_append += 1
        heard[cast.cast_id].records.append((now, audio))
        if not cast.wants_chunk:
            active.remove(cast)
    return list(heard.values())


def measure() -> tuple[float, float]:
    """The real model's fixed seconds a reading and seconds a character, fitted here."""
    from listening import english_model_dir

    from synth.model import load_synthesizer

    synth = load_synthesizer("onnx", threads=2, model_dir=str(english_model_dir()))
    synth.warm_up()
    words, chars, took = PARAGRAPH.split(), [], []
    for n in (3, 6, 10, 16, 26, 40, 60):
        for start in (0, 9):
            text = " ".join(words[start : start + n])
            started = time.perf_counter()
            synth.synthesize(text, "af_heart")
            chars.append(len(text))
            took.append(time.perf_counter() - started)
    per_char, fixed = np.polyfit(chars, took, 1)
    return float(fixed), float(per_char)


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--measure", action="store_true", help="fit the real model here first, and add it")
    args = parser.parse_args()
    profiles = list(PROFILES)
    if args.measure:
        fixed, per_char = measure()
        print(f"the model here: {fixed:.2f} s a reading + {1000 * per_char:.1f} ms a character")
        profiles.append(("this machine, measured now", fixed, per_char))
    rows: list[dict[str, Any]] = []
    for text_name, text in (("paragraph", PARAGRAPH), ("long sentences", LONG)):
        for casts in (1, 5):
            for name, fixed, per_char in profiles:
                row: dict[str, Any] = {"text": text_name, "casts": casts, "model": name, "fixed_s": fixed,
                                       "per_char_s": per_char}
                for rule_name, rule in RULES.items():
                    runs = [simulate(rule, text, casts, fixed, per_char, seed) for seed in range(args.seeds)]
                    row[rule_name] = {
                        "worst_stall_s": max(max(h.stall_s() for h in run) for run in runs),
                        "median_stall_s": statistics.median(h.stall_s() for run in runs for h in run),
                        "records_per_cast": statistics.mean(len(h.records) for run in runs for h in run),
                    }
                rows.append(row)
                before, now = (row[r]["worst_stall_s"] for r in RULES)
                print_rows({f"{text_name}, {casts} cast(s), {name}":
                            f"worst stall {before:6.2f} s before, {now:5.2f} s now; records a cast "
                            f"{row['fit the lead (before)']['records_per_cast']:5.1f} before, "
                            f"{row['ramp_cut (now)']['records_per_cast']:4.1f} now"}, 58)
    path = RESULTS / "ramp.json"
    write_results(path, {"seeds": args.seeds, "noise": NOISE, "machine": machine(), "rows": rows})
    print(f"\nwritten to {path}")


if __name__ == "__main__":
    main()
