from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunking import FIRST_CHUNK_CHARS, MAX_CHUNK_CHARS, Chunker, split_text
from chunking.cuts import FIRST_WORDS_CHARS
from chunking.phrases import FUNCTION_WORDS, bare

WS = re.compile(r"\s+")


def squash(text: str) -> str:
    return WS.sub("", text)


def check(text: str, chunks: list[str], max_chars: int = MAX_CHUNK_CHARS, first: int = FIRST_CHUNK_CHARS) -> None:
    assert all(c.strip() == c and c for c in chunks)
    assert all(len(c) <= max_chars for c in chunks[1:])
    assert not chunks or len(chunks[0]) <= first
    assert all(len(c) <= first * 2**k for k, c in enumerate(chunks))  # the ramp after the first
    assert squash("".join(chunks)) == squash(text)


prose = st.text(
    alphabet=st.sampled_from(list("abcdefghij ABC,.;:!?—-'\"\n\t 0123456789東京。、…")), max_size=2000
)


@settings(max_examples=300, deadline=None)
@given(prose)
@pytest.mark.rule("chunk-window")
def test_chunks_are_never_empty_never_over_limit_and_lose_nothing(text: str) -> None:
    check(text, split_text(text))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=600), st.integers(12, 120), st.integers(12, 120))
@pytest.mark.rule("chunk-window")
def test_limits_hold_for_any_unicode_and_any_limits(text: str, max_chars: int, first: int) -> None:
    check(text, split_text(text, max_chars=max_chars, first_chars=first), max_chars, first)


def test_sentences_split_at_stops_not_at_abbreviations(texts: dict[str, str]) -> None:
    chunks = split_text("Hello there. This is a post deployment check. It has three sentences.")
    assert chunks == ["Hello there.", "This is a post deployment check.", "It has three sentences."]
    # (past the first chunk, which is the first clause: see the tests below)
    assert split_text("Hi. Mr. Smith met Dr. Jones at 5 p.m. today. Then he left.")[1:] == [
        "Mr. Smith met Dr. Jones at 5 p.m. today.",
        "Then he left.",
    ]


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        ("We met in the U.S. Then we flew home.", ["We met in the U.S.", "Then we flew home."]),
        ("Come at 5 p.m. Bring a coat.", ["Come at 5 p.m.", "Bring a coat."]),
        ("He lives in the U.K. He said so.", ["He lives in the U.K.", "He said so."]),
        ("Apples, pears, etc. They grow.", ["Apples, pears, etc.", "They grow."]),
        ("The U.S. Army was there.", ["The U.S. Army was there."]),
        ("See e.g. The Times today.", ["See e.g. The Times today."]),
        ("Ask Dr. Brown now.", ["Ask Dr. Brown now."]),
        ("At 5 p.m. sharp we go.", ["At 5 p.m. sharp we go."]),
    ],
)
def test_initialisms_keep_their_sentence_stop_before_a_new_sentence(text: str, sentences: list[str]) -> None:
    # "Hi." takes the first chunk, so the rest is planned as sentences
    assert split_text("Hi. " + text)[1:] == sentences
    chunker = Chunker()
    assert [c for ch in "Hi. " + text for c in chunker.feed(ch)][1:] + chunker.flush() == sentences


@pytest.mark.rule("first-chunk-clause")
def test_first_chunk_is_short_for_fast_first_audio(texts: dict[str, str]) -> None:
    for name, text in texts.items():
        chunks = split_text(text)
        check(text, chunks)
        assert len(chunks[0]) <= FIRST_CHUNK_CHARS, name


def test_run_on_sentence_is_cut_into_balanced_pieces_on_word_boundaries(texts: dict[str, str]) -> None:
    run_on = next(line for line in texts["tricky"].splitlines() if line.startswith("A sentence with no"))
    chunks = split_text("Intro. Then more. And more. " + run_on)[3:]  # past the ramp: full-size chunks
    assert len(chunks) == 2
    assert abs(len(chunks[0]) - len(chunks[1])) < 60
    words = set(run_on.split())
    assert all(w in words for c in chunks for w in c.split())


def test_japanese_text_splits_at_full_stops() -> None:
    assert split_text("東京は晴れ。大阪は雨！明日は？") == ["東京は晴れ。", "大阪は雨！", "明日は？"]


def test_empty_and_blank_text_give_no_chunks() -> None:
    assert split_text("") == [] and split_text(" \n\t ") == []


def feed_in_pieces(text: str, cuts: list[int], **limits: int) -> list[str]:
    chunker = Chunker(**limits)
    bounds = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    chunks = [c for a, b in zip(bounds, bounds[1:]) for c in chunker.feed(text[a:b])]
    return chunks + chunker.flush()


@settings(max_examples=200, deadline=None)
@given(prose, st.lists(st.integers(0, 10_000), max_size=40))
@pytest.mark.rule("chunker-equals-split")
def test_chunker_fed_in_any_pieces_gives_split_texts_chunks(text: str, cuts: list[int]) -> None:
    assert feed_in_pieces(text, cuts) == split_text(text)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400), st.lists(st.integers(0, 400), max_size=20), st.integers(12, 120))
@pytest.mark.rule("chunker-equals-split")
def test_chunker_agrees_with_split_text_on_any_unicode(text: str, cuts: list[int], first: int) -> None:
    assert feed_in_pieces(text, cuts, first_chars=first) == split_text(text, first_chars=first)


# Words that make the chunker wait for more than one character after a stop.
tokens = st.lists(
    st.sampled_from(["U.S.", "p.m.", "etc.", "Dr.", "e.g.", "Then", "Army", "He", "he", "x", "A", "。", "Bring", "—"])
    | st.sampled_from([" ", "  ", "\n", ".", ",", "!", "?", "...", '"', ")", ";", "\t", "5", "word"]),
    max_size=60,
).map("".join)


@settings(max_examples=150, deadline=None)
@given(tokens, st.lists(st.integers(0, 10_000), max_size=20))
def test_chunker_agrees_with_split_text_around_initialisms(text: str, cuts: list[int]) -> None:
    assert feed_in_pieces(text, cuts) == split_text(text)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_chunker_agrees_with_split_text_on_the_repository_texts(texts: dict[str, str], data: st.DataObject) -> None:
    text = texts[data.draw(st.sampled_from(sorted(texts)))]
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=60))
    assert feed_in_pieces(text, cuts) == split_text(text)


def test_chunker_fed_one_character_at_a_time(texts: dict[str, str]) -> None:
    for text in texts.values():
        chunker = Chunker()
        assert [c for ch in text for c in chunker.feed(ch)] + chunker.flush() == split_text(text)


def test_a_sentence_is_complete_at_its_stop_and_the_next_word() -> None:
    chunker = Chunker()
    assert chunker.feed("Hello there.") == []  # "Hello there.com" may follow
    assert chunker.feed(" ") == []  # "Hello there. and more" would continue it
    assert chunker.feed("Wait") == ["Hello there."]
    assert chunker.feed("... what?") == []  # a lower-case word after the stop: one sentence
    assert chunker.pending == " Wait... what?"
    assert chunker.feed(" Yes") == ["Wait... what?"]
    assert chunker.feed(" sir") == []
    assert chunker.flush() == ["Yes sir"]
    assert chunker.count == 3


def test_flush_ends_the_pending_sentence_like_a_line_break_and_feeding_goes_on() -> None:
    chunker = Chunker()
    got = chunker.feed("It is late") + chunker.flush() + chunker.feed("and dark.") + chunker.flush()
    assert got == split_text("It is late\nand dark.") == ["It is late", "and dark."]
    assert chunker.flush() == [] and chunker.count == 2


def test_the_word_before_a_stop_starts_at_the_sentence_start() -> None:
    # the word before a stop starts at the sentence's start, so a CJK stop does not glue "東京。Mr"
    assert split_text("東京。Mr. Smith came.") == ["東京。", "Mr. Smith came."]


@pytest.mark.parametrize(
    ("text", "first"),
    [
        ("Good morning Clara, and welcome to the weekly operations summary.", "Good morning Clara,"),
        ("Annual review: a year of steady work on the city's water network.", "Annual review:"),
        ("Well - that was quick, said the engineer at the end of the day.", "Well - that was quick,"),
        ("Good evening. This is a quick sound check.", "Good evening."),
        # no clause end of about a second: the last phrase end within FIRST_WORDS_CHARS, before a
        # preposition or conjunction rather than before an article, never after a function word
        ("It is late and the city is quiet tonight.", "It is late"),
        ("The lighthouse keeper climbed the spiral stairs just before sunset.", "The lighthouse keeper climbed"),
        ("Yes, we finally shipped the new release to every customer.", "Yes, we finally shipped"),
        ("The children built a castle of sand on the beach before lunch.", "The children built a castle"),
        ("The meeting starts at 5 p.m. in the main hall downstairs.", "The meeting starts at 5 p.m."),
        ("We flew to New York for a long weekend in the autumn.", "We flew to New York"),
        # no phrase end: a shorter clause, else the first words (the first audio is never long)
        ("Sure, here is the short version of what happened at the meeting.", "Sure,"),
        ("Unbelievably extraordinary circumstances surrounding yesterday rendered everything moot.",
         "Unbelievably extraordinary"),
    ],
)
@pytest.mark.rule("first-chunk-clause")
@pytest.mark.rule("first-cut-phrase")
def test_the_first_chunk_is_the_first_clause_or_phrase(text: str, first: str) -> None:
    chunks = split_text(text)
    assert chunks[0] == first
    assert len(first) <= FIRST_WORDS_CHARS or chunks == [text]
    assert " ".join(chunks) == " ".join(text.split())


def test_every_first_chunk_of_the_texts_is_about_a_second_of_speech(texts: dict[str, str]) -> None:
    for name, text in texts.items():
        first = split_text(text)[0]
        assert len(first) <= FIRST_WORDS_CHARS, (name, first)


@pytest.mark.rule("first-chunk-clause")
def test_after_the_first_clause_chunks_are_whole_sentences_up_to_the_window() -> None:
    words = " ".join(f"word{i}" for i in range(300)) + "."
    lengths = [len(c) for c in split_text(words)]
    assert lengths[0] <= FIRST_WORDS_CHARS  # no phrase end in "word0 word1 …": the first words
    assert split_text("We went out. Then " + words)[0] == "We went out."
    assert max(lengths) <= MAX_CHUNK_CHARS and min(lengths[1:]) > 2 * FIRST_CHUNK_CHARS
    sentence = "The lighthouse keeper climbed the winding stairs every evening to light the lamp for the boats."
    assert split_text(f"Hi. {sentence} {sentence}")[1:] == [sentence, sentence]  # no ramp by position


def test_a_long_sentence_is_cut_at_clause_punctuation_before_inside_a_clause() -> None:
    sentence = (
        "The council met on a grey morning in the old hall by the river, and after a long debate about "
        "pipes and pumps and the budget for the coming years it approved the plan without a single vote against it."
    )
    chunks = split_text("Hello. Then. " + sentence, max_chars=160)[2:]
    assert chunks[0].endswith("river,"), chunks


def test_the_chunker_says_which_chunks_continue_a_sentence() -> None:
    chunker = Chunker()
    chunks = chunker.feed("Good morning Clara, and welcome to the weekly operations summary. Bye now.", final=True)
    assert chunks == ["Good morning Clara,", "and welcome to the weekly operations summary.", "Bye now."]
    assert chunker.continued == [False, True, False]


from seamcheck import OUTSIDE_SENTENCES  # noqa: E402


def ends_on_a_function_word(chunk: str) -> bool:
    return bool(chunk) and chunk[-1] not in ".!?…,;:" and bare(chunk.split()[-1]) in FUNCTION_WORDS


@pytest.mark.rule("first-cut-phrase")
def test_no_first_chunk_ends_on_a_function_word(texts: dict[str, str]) -> None:
    outside = list(OUTSIDE_SENTENCES)
    firsts = {name: split_text(text)[0] for name, text in texts.items()}
    firsts |= {line: split_text(line)[0] for line in outside}
    for paragraph in (p for text in texts.values() for p in text.split("\n\n")):
        firsts[paragraph[:40]] = split_text(paragraph)[0]  # every paragraph as a cast's first
    bad = {name: first for name, first in firsts.items() if ends_on_a_function_word(first)}
    assert not bad
    assert len({f for f in firsts.values() if f in outside}) < len(outside) // 2  # most outside ones are cut


@pytest.mark.rule("first-cut-phrase")
def test_a_first_sentence_the_model_reads_in_time_goes_whole_and_the_ramp_goes_on() -> None:
    text = "The children built a castle of sand on the beach before lunch. " + " ".join(
        f"Then word{i} came." for i in range(40))
    cut, whole = Chunker(), Chunker(whole_first_chars=len(text.split(". ")[0]) + 1)
    assert cut.feed(text, final=True)[:2] == ["The children built a castle", "of sand on the beach before lunch."]
    assert cut.continued[:3] == [False, True, False]
    chunks = whole.feed(text, final=True)
    assert chunks[0] == "The children built a castle of sand on the beach before lunch."
    assert whole.continued[:2] == [False, False]
    check(text, chunks)  # chunk k within FIRST_CHUNK_CHARS * 2**k: the ramp as before
    # a longer first sentence than that is cut as before
    short = Chunker(whole_first_chars=20).feed(text, final=True)
    assert short[0] == "The children built a castle"


@settings(max_examples=100, deadline=None)
@given(prose, st.lists(st.integers(0, 10_000), max_size=20), st.integers(0, 400))
@pytest.mark.rule("chunker-equals-split")
def test_chunker_fed_in_pieces_agrees_whatever_the_first_sentence_allowance(
    text: str, cuts: list[int], whole: int
) -> None:
    chunker = Chunker(whole_first_chars=whole)
    bounds = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    chunks = [c for a, b in zip(bounds, bounds[1:]) for c in chunker.feed(text[a:b])] + chunker.flush()
    assert chunks == Chunker(whole_first_chars=whole).feed(text, final=True)
    check(text, chunks)


@pytest.mark.parametrize(("sentence", "never"), [
    ("At the end of the day we met at 5 p.m. in the hall by the door.", "5"),
    ("In the summer of that year we went to New York for a week away.", "New"),
    ("They said that the very best of them could not have done it sooner.", "very"),
])
@pytest.mark.rule("first-cut-phrase")
def test_a_phrase_never_ends_inside_a_number_with_its_unit_or_a_name(sentence: str, never: str) -> None:
    first = split_text(sentence)[0]
    assert first.split()[-1] != never and not ends_on_a_function_word(first), first
