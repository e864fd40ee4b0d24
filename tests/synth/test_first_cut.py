"""The first chunk is cut only when it pays, and a chunk a sentence goes on after is read with the
next words in view (the model's own side of that is in test_listen.py)."""

from __future__ import annotations

import numpy as np
import pytest
from redis.asyncio import Redis

from castlog import Audio, CastState, CastStore, Entry, Eos, Meta, Start, split_text
from synth import seams
from synth.cast import Assignment, plan
from synth.config import SynthConfig
from synth.dispatcher import infer
from synth.model.timing import Word
from synth.scheduler import ModelSpeed
from synth.worker import Worker
from tests.synth.support import StandIn, config, running, submit, terminal

TEXT = "The children built a castle of sand on the beach before lunch. Then they swam. It was warm."


def test_the_first_audio_target_is_a_named_setting_with_a_default() -> None:
    assert SynthConfig.from_env({}).first_audio_target_s == 0.5
    assert SynthConfig.from_env({"SYNTH_FIRST_AUDIO_TARGET_S": "0"}).first_audio_target_s == 0.0  # always cut
    with pytest.raises(ValueError, match="SYNTH_FIRST_AUDIO_TARGET_S"):
        SynthConfig.from_env({"SYNTH_FIRST_AUDIO_TARGET_S": "-1"})


@pytest.mark.rule("first-cut-phrase")
def test_the_first_sentence_goes_whole_when_the_model_reads_it_within_the_target() -> None:
    speed = ModelSpeed()
    assert speed.whole_first_chars(0.5) == 0  # the speed unknown: cut, as on a slow CPU
    speed.observe(0.02, 100, audio_s=6.0)  # a GPU: RTF 0.003
    assert speed.whole_first_chars(0.5) > 1000
    gpu = plan_for(TEXT, [], speed.whole_first_chars(0.5))
    assert gpu.chunks[0] == "The children built a castle of sand on the beach before lunch."
    cpu = ModelSpeed()
    cpu.observe(1.5, 100, audio_s=6.0)  # RTF 0.25: the 62 characters take about a second
    assert cpu.whole_first_chars(0.5) == 32
    assert plan_for(TEXT, [], cpu.whole_first_chars(0.5)).chunks[:2] == split_text(TEXT)[:2] == [
        "The children built a castle", "of sand on the beach before lunch."]
    assert plan_for(TEXT, [], cpu.whole_first_chars(0.0)).chunks == split_text(TEXT)  # 0: always cut


@pytest.mark.rule("first-cut-phrase")
def test_a_resumed_cast_keeps_the_first_cut_its_log_has_whatever_the_speed_now() -> None:
    cut_first = [audio(0, "The children built a castle")]
    resumed = plan_for(TEXT, cut_first, whole_first_chars=10_000)  # a GPU took over from a CPU
    assert resumed.chunks[:2] == ["The children built a castle", "of sand on the beach before lunch."]
    assert resumed.resume_from == 1 and resumed.continued[1]
    whole_first = [audio(0, "The children built a castle of sand on the beach before lunch.")]
    resumed = plan_for(TEXT, whole_first, whole_first_chars=0)  # a CPU took over from a GPU
    assert resumed.chunks[:2] == ["The children built a castle of sand on the beach before lunch.", "Then they swam."]
    assert resumed.resume_from == 1


@pytest.mark.rule("first-cut-phrase")
async def test_a_worker_whose_model_is_fast_reads_the_next_casts_first_sentence_whole(
    redis: Redis, store: CastStore
) -> None:
    first, second = "Hi there. A first cast.", TEXT
    async with running(Worker(config(first_audio_target_s=0.5), redis, StandIn(rtf=0.001))):
        await terminal(store, await submit(store, first))  # its speed is unknown yet: cut as planned
        entries = await terminal(store, await submit(store, second))
    made = [e.record.t for e in entries if isinstance(e.record, Audio)]
    assert made == ["The children built a castle of sand on the beach before lunch.", "Then they swam.", "It was warm."]
    eos = entries[-1].record
    assert isinstance(eos, Eos) and eos.sentences == 3  # meta.sentences planned 4, with the cut
    assert isinstance(entries[0].record, Meta) and entries[0].record.sentences == 4


def plan_for(text: str, made: list[Audio], whole_first_chars: int):  # type: ignore[no-untyped-def]
    records = [Meta("t", "af_heart", len(text), len(split_text(text)), 0), Start(1, 0, 0), *made]
    entries = [Entry(seq_num=k, ts=0, record=r) for k, r in enumerate(records)]
    state = CastState()
    for e in entries:
        state.add(e)
    job = Assignment(entry_id="1-0", cast_id="c" * 12, enqueued_at=0, deliveries=1)
    return plan(job, "af_heart", text, entries, state, len(entries), whole_first_chars=whole_first_chars)


def audio(i: int, text: str) -> Audio:
    return Audio(i=i, t=text, d=1000, o=0, body=b"mp3")


class Timed:
    """A model that times its words: 100 ms of tone per word (each word's own pitch) after a
    100 ms pad, so that where the audio is cut can be read off the samples."""

    def __init__(self) -> None:
        self.read: list[str] = []

    def synthesize(self, text: str, voice: str, speed: float = 1.0) -> np.ndarray:
        return self.synthesize_timed(text, voice, speed)[0]

    def synthesize_timed(self, text: str, voice: str, speed: float = 1.0) -> tuple[np.ndarray, list[Word]]:
        self.read.append(text)
        words = text.split()
        pcm = np.zeros(2400 * (len(words) + 2), np.float32)
        for k in range(len(words)):
            pcm[2400 * (k + 1) : 2400 * (k + 2)] = k + 1
        return pcm, [(w.strip(".,"), 100 * (k + 1), 100 * (k + 2)) for k, w in enumerate(words)]


@pytest.mark.rule("seam-continues")
def test_a_chunk_the_sentence_goes_on_after_is_read_on_into_the_next_words_and_cut_where_they_begin() -> None:
    model = Timed()
    pcm, words = seams.read(infer, model, "The children built a castle", "af_heart", 1.0, "of sand")
    assert model.read == ["The children built a castle of sand"]
    assert [w for w, _, _ in words] == ["The", "children", "built", "a", "castle"]
    assert len(pcm) == 2400 * 6 and pcm[-1] == 5  # up to where "of" begins: nothing of it
    # the words do not line up with the text (a number read out): the chunk is read alone
    model = Timed()
    model.synthesize_timed = lambda text, voice, speed=1.0: (np.ones(2400, np.float32), [("five", 0, 50)])  # type: ignore[method-assign]
    pcm, _ = seams.read(infer, model, "at 5", "af_heart", 1.0, "p.m. in the")
    assert len(pcm) == 2400
    assert seams.lookahead("of sand on the beach before lunch.") == "of sand"
    # the chunk after: read from the words before it, its audio from where its own words begin
    model = Timed()
    pcm, words = seams.read(infer, model, "of sand", "af_heart", 1.0, "", "built a castle")
    assert model.read == ["built a castle of sand"]
    assert words == [("of", 0, 100), ("sand", 100, 200)]
    assert pcm[0] == 4 and len(pcm) == 2400 * 3  # from "of" on, with the model's end pad


@pytest.mark.rule("seam-continues")
def test_only_chunks_at_a_seam_inside_a_sentence_get_their_neighbours_words() -> None:
    cast = plan_for(TEXT, [], whole_first_chars=0)
    assert [cast.context(i) for i in range(len(cast.chunks))] == [
        ("", "of sand"), ("built a castle", ""), ("", ""), ("", "")]
