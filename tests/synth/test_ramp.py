"""The ramp follows the model's measured real-time factor r: each chunk after the first is no
longer than its listener's buffer ÷ r, so a listener who started at the first audio never runs dry
while the model keeps up, on a slow CPU (r near 1) and a GPU (r near 0) alike."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from redis.asyncio import Redis

from castlog import Audio, CastStore, Eos
from chunking import split_text
from synth.cast import ActiveCast, Assignment
from synth.config import SynthConfig
from synth.scheduler import RAMP_MIN_CHARS, ModelSpeed, ramp_limit
from synth.worker import Worker
from tests.synth.support import StandIn, config, running, submit, terminal

CHARS_PER_S = 16  # the stand-in's speech: a character is 1/16 s of audio
SENTENCE = ("The old lighthouse keeper climbed the winding stairs every evening at dusk to light the lamp that "
            "guided the fishing boats safely home across the dark and restless water.")
STORM = "When the storm finally passed over the valley, the farmers walked out to see."
TEXT = " ".join([STORM] + [SENTENCE] * 6)


def test_the_longest_next_chunk_is_the_lead_over_the_real_time_factor() -> None:
    speed = ModelSpeed()
    assert speed.ramp_chars(2.0) is None  # unknown speed: no cut
    speed.observe(0.9, 16, audio_s=1.0)  # r = 0.9 at 16 characters a second
    assert speed.ramp_chars(4.5) == int(4.5 / 0.9 * 16) == 80
    assert speed.ramp_chars(4.5, speed=2.0) == 160  # at double speed a character is half the audio
    assert speed.ramp_chars(0.5) == RAMP_MIN_CHARS  # a thin lead: the shortest chunk, not none
    assert speed.ramp_chars(-3.0) == RAMP_MIN_CHARS  # already dry
    gpu = ModelSpeed()
    gpu.observe(0.05, 16, audio_s=1.0)
    assert gpu.ramp_chars(1.5) == 480  # twenty times the lead


def test_the_ramp_sizes_what_the_model_reads_not_what_it_keeps() -> None:
    # chunks cut inside sentences: each read with 16 characters of its neighbours beside its own
    # 16, so each costs twice the model time of its kept audio. The RTF (admission's) counts that;
    # the ramp's speed is the model's own, and the chunk leaves room for its context.
    speed = ModelSpeed()
    for _ in range(20):
        speed.observe(0.9, 16, audio_s=0.5, read_chars=32)  # the model: 0.9 s for 32 characters read
    assert speed.rtf == pytest.approx(1.8)  # per second kept: what admission must plan with
    assert speed.ramp_chars(4.5) == 160  # 4.5 s of the model's time reads 160 characters
    assert speed.ramp_chars(4.5, context_chars=16) == 144  # of which 16 are the neighbours'
    kept = ModelSpeed()
    for _ in range(20):
        kept.observe(0.9, 16, audio_s=0.5)  # the same chunks counted by what they kept
    assert kept.ramp_chars(4.5) == 80  # half: a slower model than there is, and smaller cuts


@dataclass
class Run:
    chunks: list[str]
    worst_stall_s: float  # the longest a listener from the first audio waited for the next chunk
    worst_gap_s: float  # the longest between two appends


def simulate(text: str, rtf: float, gap_s: float | None = None) -> Run:
    """The dispatcher's loop for one cast on a stand-in model that takes ``rtf`` seconds per
    second of audio, on a simulated clock: take a chunk at the ramp's limit, make it, append it."""
    job = Assignment(entry_id="1-0", cast_id="c" * 12, enqueued_at=0, deliveries=1)
    chunker_chunks = split_text(text)
    cast = ActiveCast(job=job, voice="af_heart", chunks=chunker_chunks, continued=[False] * len(chunker_chunks),
                      attempt=1, job_attempt=1, resume_from=0, tail=1, offset_ms=0, first_audio_ts=None)
    speed, now, worst, gap = ModelSpeed(), 0.0, 0.0, 0.0
    while cast.wants_chunk:
        _, chunk = cast.take_chunk(ramp_limit(speed, cast.pace, now, gap_s=gap_s))
        audio_s = len(chunk) / CHARS_PER_S
        now += rtf * audio_s
        gap = max(gap, rtf * audio_s) if cast.pace.first_audio_at is not None else gap
        if cast.pace.first_audio_at is not None:
            worst = max(worst, -cast.pace.lead(now))
        speed.observe(rtf * audio_s, len(chunk), audio_s)
        cast.pace = cast.pace.made(round(audio_s * 1000), now).appended(round(audio_s * 1000), now)
        cast.next_append += 1
    return Run(cast.chunks, worst, gap)


@pytest.mark.parametrize("rtf", [0.9, 0.6, 0.3])
def test_a_listener_never_runs_dry_while_the_model_keeps_up(rtf: float) -> None:
    run = simulate(TEXT, rtf)
    assert run.worst_stall_s == 0.0, run
    assert " ".join(run.chunks) == " ".join(TEXT.split())
    assert run.chunks[0] == "When the storm finally passed"
    # while the buffer is thin, a slow model's sentences are cut; at r = 0.3 they fit whole
    assert (len(run.chunks) > len(split_text(TEXT))) == (rtf > 0.5)


def test_on_a_fast_model_the_chunks_are_whole_sentences() -> None:
    assert simulate(TEXT, 0.05).chunks == split_text(TEXT)


def test_a_ramp_of_fixed_lengths_stalls_where_the_measured_one_does_not() -> None:
    # the old ramp (80, 160, 300 characters) on a model at r = 0.9: the next chunk takes r times
    # its length while only the chunk before is buffered
    fixed, buffered, stalled = [80, 160, 300], 80 / CHARS_PER_S, 0.0
    for n in fixed[1:]:
        stalled += max(0.0, 0.9 * n / CHARS_PER_S - buffered)
        buffered += n / CHARS_PER_S - 0.9 * n / CHARS_PER_S
    assert stalled > 2.0
    assert simulate(TEXT, 0.9).worst_stall_s == 0.0


async def test_a_worker_on_a_slow_model_cuts_its_chunks_to_the_buffer(redis: Redis, store: CastStore) -> None:
    async with running(Worker(config(), redis, StandIn(rtf=0.7))):
        entries = await terminal(store, await submit(store, f"{STORM} {SENTENCE}"))
    made = [e.record.t for e in entries if isinstance(e.record, Audio)]
    assert " ".join(made) == f"{STORM} {SENTENCE}"
    assert made[0] == "When the storm finally passed"
    assert SENTENCE not in made  # the long sentence came after a thin buffer: it is cut
    eos = entries[-1].record
    assert isinstance(eos, Eos) and eos.sentences == len(made) > len(split_text(f"{STORM} {SENTENCE}"))


FOURTEEN = [
    "The town woke slowly under a pale winter sky.",
    "Smoke rose from the chimneys of the houses along the river, and the baker opened his shutters early.",
    "Children ran down the lane with their satchels swinging behind them.",
    "At the corner the old postman stopped to talk with the woman who sold newspapers and hot tea.",
    "Nobody was in a hurry.",
    "By nine the market square was full of stalls selling apples, cheese, wool and copper pans.",
    "A man with a fiddle played the same three tunes he had played every Saturday for twenty years.",
    "The mayor walked past with his dog and nodded to everyone he knew, which was nearly everyone.",
    "Later the clouds broke and the sun lit the wet roofs until they shone like silver.",
    "The fishermen came back at noon with nets that were lighter than they had hoped.",
    "Still, there was enough for supper, and the inn put a pot of stew on the fire.",
    "In the afternoon the wind turned and carried the smell of the sea up the hill.",
    "When the lamps were lit, the square emptied and the town settled down for the night.",
    "Only the baker stayed up, kneading tomorrow's bread in the warm light of his kitchen.",
]


@pytest.mark.parametrize("rtf", [0.05, 0.5, 0.9])
def test_an_edited_sentence_changes_only_its_own_chunks(rtf: float) -> None:
    edited = list(FOURTEEN)
    edited[7] = "The mayor strolled by with his old spaniel and greeted everybody, which meant nearly the whole town."
    before, after = simulate(" ".join(FOURTEEN), rtf).chunks, simulate(" ".join(edited), rtf).chunks
    old = [c for c in before if c not in after]
    new = [c for c in after if c not in before]
    assert before[: before.index(old[0])] == after[: after.index(new[0])]  # every chunk before it the same
    changed = " ".join(new)
    assert "The mayor strolled" in changed and len(new) <= 3, new  # the edited sentence (and a neighbour)
    assert all(c in " ".join(edited[6:9]) for c in new)


def test_the_live_gap_is_a_named_setting_with_a_default() -> None:
    assert SynthConfig.from_env({}).live_gap_s == 2.0
    with pytest.raises(ValueError, match="SYNTH_LIVE_GAP_S"):
        SynthConfig.from_env({"SYNTH_LIVE_GAP_S": "0"})


@pytest.mark.parametrize("rtf", [0.9, 0.5])
def test_a_live_turns_audio_messages_come_within_the_gap_while_the_model_keeps_up(rtf: float) -> None:
    whole = simulate(TEXT, rtf)
    assert whole.worst_gap_s > 3.0  # a buffered listener does not stall, but a framework would stop waiting
    live = simulate(TEXT, rtf, gap_s=2.0)
    assert live.worst_gap_s <= 2.0 and live.worst_stall_s == 0.0
    assert " ".join(live.chunks) == " ".join(TEXT.split())
    speed = ModelSpeed()
    speed.observe(1.0, 20, audio_s=1.2)  # 50 ms of model time a character
    assert speed.gap_chars(2.0) == 40 and speed.gap_chars(0.5) == RAMP_MIN_CHARS
