"""The ramp follows the model's measured speed: while a listener's buffer is thin, a sentence is
cut where that spares its listener a stall without costing the model more than it saves (what the
model reads for each cut, its fixed cost a reading included), so a listener who started at the
first audio never runs dry while the model keeps up, on a slow CPU (r near 1) and a GPU (r near
0) alike, and a cast does not fall behind cut after cut (#37)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import pytest
from redis.asyncio import Redis

from castlog import Audio, CastStore, Eos
from chunking import split_text
from synth import seams
from synth.cast import ActiveCast, Assignment
from synth.config import SynthConfig
from synth.scheduler import Cut, ModelSpeed, Pace, ramp_cut
from synth.worker import Worker
from tests.synth.support import StandIn, config, running, submit, terminal

CHARS_PER_S = 16  # the stand-in's speech: a character is 1/16 s of audio
SENTENCE = ("The old lighthouse keeper climbed the winding stairs every evening at dusk to light the lamp that "
            "guided the fishing boats safely home across the dark and restless water.")
STORM = "When the storm finally passed over the valley, the farmers walked out to see."
TEXT = " ".join([STORM] + [SENTENCE] * 6)


def test_the_models_time_to_read_is_fitted_as_a_fixed_cost_and_a_cost_a_character() -> None:
    speed = ModelSpeed()
    assert speed.read_s(100) == 0.0  # unknown
    for chars in (30, 60, 120, 45, 90):
        speed.observe(0.5 + 0.02 * chars, chars, audio_s=chars / CHARS_PER_S)
    assert speed.read.cost() == pytest.approx((0.5, 0.02))
    assert speed.read_s(100) == pytest.approx(2.5) and speed.read_s(100, speed=2.0) == pytest.approx(1.25)
    same = ModelSpeed()
    for _ in range(5):
        same.observe(1.0, 40, audio_s=2.5)  # one length only: no fixed cost can be told apart
    assert same.read.cost() == pytest.approx((0.0, 1 / 40))


def test_the_ramp_weighs_what_the_model_reads_not_what_it_keeps() -> None:
    # chunks cut inside sentences: each read with its neighbours' words beside its own 16
    # characters. The RTF (admission's) counts them; the ramp's cost is the model's reading.
    speed = ModelSpeed()
    for chars in (32, 48, 64):
        speed.observe(0.9 * chars / 32, 16, audio_s=0.5, read_chars=chars)
    assert speed.rtf > 1.8
    assert speed.read.cost() == pytest.approx((0.0, 0.9 / 32))


def ramp_cuts(fixed_s: float, per_char: float) -> ModelSpeed:
    speed = ModelSpeed()
    for chars in (30, 60, 120):
        speed.observe(fixed_s + per_char * chars, chars, audio_s=chars / CHARS_PER_S)
    return speed


WHOLE, HEAD = Cut(100), Cut(30, ahead=12, behind=16)  # a sentence; a head read with 2 words ahead, its rest 3 behind


def test_the_ramp_cuts_nothing_before_the_first_audio_or_while_the_speed_is_unknown() -> None:
    assert ramp_cut(ModelSpeed(), Pace(first_audio_at=0.0, appended_ms=2000), 0.0, WHOLE, lambda: [HEAD]) is None
    assert ramp_cut(ramp_cuts(0.0, 0.05), Pace(), 0.0, WHOLE, lambda: [HEAD]) is None


@pytest.mark.rule("ramp-weighs-cuts")
def test_a_thin_lead_cuts_a_long_sentence_where_the_model_has_no_fixed_cost() -> None:
    # 2 s buffered; at r = 0.8 the 100 characters take 5 s whole (a 3 s stall), in three pieces
    # none: the ramp cuts the first within the lead
    speed, lead = ramp_cuts(0.0, 0.05), Pace(first_audio_at=0.0, appended_ms=2000)
    assert ramp_cut(speed, lead, 0.0, WHOLE, lambda: [Cut(30), Cut(60)]) == 0
    # the later cut need not be one to make now: a word boundary the rest's ramp may cut at
    assert ramp_cut(speed, lead, 0.0, WHOLE, lambda: [Cut(30), Cut(60, later=True)]) == 0
    assert ramp_cut(speed, lead, 0.0, WHOLE, lambda: [Cut(30, later=True)]) is None  # no head: whole
    gpu = ramp_cuts(0.02, 0.0005)
    assert ramp_cut(gpu, lead, 0.0, WHOLE, lambda: [HEAD, Cut(60, 12, 16)]) is None  # whole: no stall either way


@pytest.mark.rule("ramp-weighs-cuts")
def test_a_thin_lead_reads_a_sentence_whole_where_a_cut_would_cost_more_than_it_saves() -> None:
    # onnx on a CPU: half a second a reading. A head that fits the lead reads 28 more characters in
    # all and pays the fixed cost twice: it saves a moment now and leaves the listener behind (#37)
    speed, lead = ramp_cuts(0.5, 0.023), Pace(first_audio_at=0.0, appended_ms=1500)
    assert ramp_cut(speed, lead, 0.0, Cut(47), lambda: [HEAD]) is None


def test_a_live_cast_cuts_where_the_model_reads_its_first_piece_within_the_gap() -> None:
    speed, lead = ramp_cuts(0.0, 0.05), Pace(first_audio_at=0.0, appended_ms=20_000)
    assert ramp_cut(speed, lead, 0.0, WHOLE, lambda: [HEAD, Cut(60, 12, 16)]) is None  # a full buffer: whole
    assert ramp_cut(speed, lead, 0.0, WHOLE, lambda: [HEAD, Cut(60, 12, 16)], gap_s=4.5) == 1  # 72 read in 3.6 s, 100 in 5
    assert ramp_cut(speed, lead, 0.0, WHOLE, lambda: [HEAD, Cut(60, 12, 16)], gap_s=4.0) == 0  # 3.6 s: over 0.8 of it
    assert ramp_cut(speed, lead, 0.0, WHOLE, lambda: [HEAD, Cut(60, 12, 16)], gap_s=0.5) == 0  # none within: the shortest


@dataclass
class Run:
    chunks: list[str]
    worst_stall_s: float  # the longest a listener from the first audio waited for the next chunk
    worst_gap_s: float  # the longest between two appends


def simulate(text: str, rtf: float, gap_s: float | None = None, fixed_s: float = 0.0, seams_read: bool = False) -> Run:
    """The dispatcher's loop for one cast on a stand-in model on a simulated clock: take the
    ramp's cut, make it, append it. The model takes ``fixed_s`` a reading and ``rtf`` seconds per
    second of the audio of what it reads: with ``seams_read``, a chunk cut inside a sentence
    with its neighbours' words (synth.seams), as the real model does."""
    job = Assignment(entry_id="1-0", cast_id="c" * 12, enqueued_at=0, deliveries=1)
    chunker_chunks = split_text(text)
    cast = ActiveCast(job=job, voice="af_heart", chunks=chunker_chunks, continued=[False] * len(chunker_chunks),
                      attempt=1, job_attempt=1, resume_from=0, tail=1, offset_ms=0, first_audio_ts=None)
    read = partial(seams.read_text, Timed()) if seams_read else (lambda text, ahead, behind: text)
    speed, now, worst, gap = ModelSpeed(), 0.0, 0.0, 0.0
    while cast.wants_chunk:
        cut = ramp_cut(speed, cast.pace, now, cast.whole_cut(read), partial(cast.cuts, read), gap_s=gap_s)
        index, chunk = cast.take_chunk(None if cut is None else cast.heads()[cut])
        behind, ahead = cast.context(index)
        seen = read(chunk, ahead, behind)
        audio_s = len(chunk) / CHARS_PER_S
        took = fixed_s + rtf * len(seen) / CHARS_PER_S
        now += took
        gap = max(gap, took) if cast.pace.first_audio_at is not None else gap
        if cast.pace.first_audio_at is not None:
            worst = max(worst, -cast.pace.lead(now))
        speed.observe(took, len(chunk), audio_s, read_chars=len(seen))
        cast.pace = cast.pace.made(round(audio_s * 1000), now).appended(round(audio_s * 1000), now)
        cast.next_append += 1
    return Run(cast.chunks, worst, gap)


class Timed:
    """What seams.read_text asks of a model: it times its words."""

    def synthesize_timed(self) -> None: ...


@pytest.mark.parametrize("rtf", [0.9, 0.6, 0.3])
def test_a_listener_never_runs_dry_while_the_model_keeps_up(rtf: float) -> None:
    run = simulate(TEXT, rtf)
    assert run.worst_stall_s == 0.0, run
    assert " ".join(run.chunks) == " ".join(TEXT.split())
    assert run.chunks[0] == "When the storm finally passed"
    # while the buffer is thin, a slow model's sentences are cut; at r = 0.3 they fit whole
    assert (len(run.chunks) > len(split_text(TEXT))) == (rtf > 0.5)


PARAGRAPH = (
    "The lighthouse keeper climbed the stairs at sunset. She had done it every evening for eleven years. At the top "
    "she wiped the salt from the great lens with a soft cloth and checked the oil in the lamp. Far below, the tide "
    "was turning, and the fishing boats were making their slow way back into the harbour. A gull settled on the "
    "railing and watched her work without fear.")


@pytest.mark.rule("ramp-weighs-cuts")
@pytest.mark.parametrize(("fixed_s", "rtf", "stall_s"), [(0.5, 0.45, 2.0), (0.5, 0.6, 2.0), (0.8, 0.6, 3.0), (0.0, 0.8, 3.0)])
def test_a_cast_does_not_fall_behind_cut_after_cut_on_a_model_with_a_fixed_cost(
    fixed_s: float, rtf: float, stall_s: float,
) -> None:
    # onnx on a CPU: about half a second a reading whatever its length (this machine: 0.53 s and
    # 23 ms a character), and a chunk cut inside a sentence read with its neighbours' words. A
    # ramp that cut each chunk to fit the lead fell to its shortest chunk, each making less audio
    # than its model time, and never climbed back (#37: 27 chunks a paragraph, stalls of 2-8 s).
    # Where the model has time to spare the listener stalls at most 2 s in all; where it barely
    # keeps up, a little more, once, near the start
    run = simulate(PARAGRAPH, rtf, fixed_s=fixed_s, seams_read=True)
    assert run.worst_stall_s <= stall_s, run
    assert len(run.chunks) <= len(split_text(PARAGRAPH)) + 2, run.chunks
    assert " ".join(run.chunks) == PARAGRAPH


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
