"""The first chunk is always a phrase, a resume keeps the chunks made, and a chunk a sentence goes
on after is read with the next words in view (the model's own side of that is in test_listen.py)."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

from castlog import Audio, CastState, Entry, Meta, Start
from chunking import split_text
from synth import seams
from synth.cast import Assignment, plan
from synth.dispatcher import infer
from synth.model.timing import Word
from synth.scheduler import Cut

TEXT = "The children built a castle of sand on the beach before lunch. Then they swam. It was warm."


STORM = ("When the storm finally passed over the valley, the farmers walked out to see what the wind had left "
         "of the wheat. It was a lot.")


@pytest.mark.rule("first-cut-phrase")
def test_the_first_chunk_is_a_phrase_whatever_the_first_sentence() -> None:
    assert plan_for(STORM, []).chunks[:2] == [
        "When the storm finally passed", "over the valley, the farmers walked out to see what the wind had left of the wheat."]
    # no phrase end in its first words: cut at a word boundary after a content word all the same
    words = "Unbelievably extraordinary circumstances surrounding yesterday afternoon rendered everything impossible."
    assert split_text(words)[0] == "Unbelievably extraordinary"
    long_word = "Supercalifragilisticexpialidocious wonderfulness notwithstanding everything."
    assert split_text(long_word)[0] == "Supercalifragilisticexpialidocious"


@pytest.mark.rule("first-cut-phrase")
def test_a_resumed_cast_keeps_the_chunks_its_log_has() -> None:
    cut_first = [audio(0, "The children built a castle")]
    resumed = plan_for(TEXT, cut_first)
    assert resumed.chunks[:2] == ["The children built a castle", "of sand on the beach before lunch."]
    assert resumed.resume_from == 1 and resumed.continued[1]
    # an earlier attempt's ramp cut the second chunk finer: its rest is the next chunk
    ramped = [*cut_first, audio(1, "of sand on the beach")]
    resumed = plan_for(TEXT, ramped)
    assert resumed.chunks == ["The children built a castle", "of sand on the beach", "before lunch.", "Then they swam.",
                              "It was warm."]
    assert resumed.resume_from == 2 and resumed.continued == [False, True, True, False, False]
    assert resumed.context(2) == ("on the beach", "")
    whole_first = [audio(0, "The children built a castle of sand on the beach before lunch.")]  # an older worker
    resumed = plan_for(TEXT, whole_first)
    assert resumed.chunks[:2] == ["The children built a castle of sand on the beach before lunch.", "Then they swam."]
    assert resumed.resume_from == 1 and resumed.continued[:2] == [False, False]


def plan_for(text: str, made: list[Audio]):  # type: ignore[no-untyped-def]
    records = [Meta("t", "af_heart", len(text), len(split_text(text)), 0), Start(1, 0, 0), *made]
    entries = [Entry(seq_num=k, ts=0, record=r) for k, r in enumerate(records)]
    state = CastState()
    for e in entries:
        state.add(e)
    job = Assignment(entry_id="1-0", cast_id="c" * 12, enqueued_at=0, deliveries=1)
    return plan(job, "af_heart", text, entries, state, len(entries))


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
    cast = plan_for(TEXT, [])
    assert [cast.context(i) for i in range(len(cast.chunks))] == [
        ("", "of sand"), ("built a castle", ""), ("", ""), ("", "")]


def test_what_the_model_reads_is_counted_and_left_room_for() -> None:
    # the model's reading, as the worker measures its speed by it (ModelSpeed.read)
    model = Timed()
    assert seams.read_text(model, "of sand", "", "built a castle") == "built a castle of sand"
    assert seams.read_text(model, "The children built a castle", "of sand") == "The children built a castle of sand"
    assert seams.read_text(model, "これは", "ペンです") == "これは"  # not Latin: read alone
    assert seams.read_text(object(), "of sand", "", "built a castle") == "of sand"  # untimed: alone
    # the ramp's choices (ActiveCast.cuts): for each head, what the model reads for it and its rest
    cast = plan_for("The children built a castle of sand on the beach before lunch with their father.", [])
    assert cast.take_chunk() == (0, "The children built a castle")  # the first phrase
    read = partial(seams.read_text, model)
    options, whole, cuts = cast.heads(), cast.whole_cut(read), cast.cuts(read)
    rest = "of sand on the beach before lunch with their father."
    assert whole == Cut(len(rest), 0, len("built a castle "))  # whole: three words behind
    k = options.index("of sand on the beach")
    assert cuts[k] == Cut(len("of sand on the beach"), len(" before lunch"), len("on the beach "))
    assert all(not c.later for c in cuts[: len(options)]) and all(c.later for c in cuts[len(options) :])
    assert {c.chars for c in cuts} == {len(" ".join(rest.split()[:n])) for n in range(1, len(rest.split()))}
