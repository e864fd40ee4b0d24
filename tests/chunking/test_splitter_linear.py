"""The splitter in linear time: the same chunks as the quadratic reference on any text of a
bounded size, and a count of the characters it looks at that doubles, no more, when the text
does, over the texts that were quadratic (nothing here is timed)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunking import Chunker, split_text
from chunking.phrases import bare
from chunking.textsteps import spent
from tests.support import oldsplitter

# Pieces that reach every branch: stops of both scripts and their runs, closers, abbreviations,
# initialisms, function words, names, clause marks, a no-break space.
PIECES = [*"abcdefghij ABC,.;:!?—-'\"\n\t 0123456789東京。、…」)", "Mr. ", "U.S. ", "p.m. ", "etc. ", " of ",
          " the ", "The ", "castle ", "New York", "\u00a0", "((", "...", "?!", "e.g."]
texts = st.lists(st.sampled_from(PIECES), max_size=250).map("".join)
limits = st.sampled_from([(300, 80, 0), (40, 12, 0), (120, 30, 60), (12, 12, 0)])


@settings(max_examples=400, deadline=None)
@given(texts, limits)
def test_the_linear_splitter_gives_the_references_chunks(text: str, limit: tuple[int, int, int]) -> None:
    max_chars, first_chars, whole = limit
    chunker = Chunker(max_chars=max_chars, first_chars=first_chars, whole_first_chars=whole)
    reference = oldsplitter.OldChunker(max_chars=max_chars, first_chars=first_chars, whole_first_chars=whole)
    assert chunker.feed(text, final=True) == reference.feed(text, final=True)
    assert chunker.continued == reference.continued


@settings(max_examples=200, deadline=None)
@given(texts, st.lists(st.integers(0, 2000), max_size=4))
def test_the_linear_chunker_fed_in_pieces_gives_the_references_chunks(text: str, cuts: list[int]) -> None:
    chunker, reference = Chunker(), oldsplitter.OldChunker()
    got: list[str] = []
    want: list[str] = []
    prev = 0
    for cut in [*sorted(c % (len(text) + 1) for c in cuts), len(text)]:
        got += chunker.feed(text[prev:cut])
        want += reference.feed(text[prev:cut])
        prev = cut
    assert got + chunker.flush() == want + reference.flush()


@given(st.text(st.characters(blacklist_categories=("Zs", "Zl", "Zp", "Cc")), max_size=40))
def test_bare_strips_as_the_reference_did(token: str) -> None:
    assert bare(token) == oldsplitter.bare(token)


# The texts that were quadratic: a run of stops (16 000 froze intake for 16 s), a sentence with no
# stop, a title that never ends a sentence, a run of stops before a word, a long word, and more.
FAMILIES: dict[str, Callable[[int], str]] = {
    "run of stops": lambda n: "." * n,
    "run of stops then a word": lambda n: "x " + "." * n + "x of y",
    "no stop": lambda n: "word " * (n // 5),
    "no space": lambda n: "a" * n,
    "titles": lambda n: "Mr. " * (n // 4),
    "titles with no-break spaces": lambda n: "Mr.\u00a0" * (n // 4),
    "initialisms": lambda n: "U.S. " * (n // 5),
    "ellipses": lambda n: "a... " * (n // 5),
    "Latin and CJK stops": lambda n: ".。" * (n // 2),
    "brackets before a word": lambda n: "a b " + "(" * n + "of",
    "phrases": lambda n: "castle of " * (n // 10),
    "clauses": lambda n: "a, " * (n // 3),
}


def steps(text: str) -> int:
    before = spent()
    split_text(text)
    return spent() - before


@pytest.mark.parametrize("family", FAMILIES)
def test_the_splitters_work_grows_linearly_with_the_text(family: str) -> None:
    make = FAMILIES[family]
    for n in (4_000, 16_000):
        small, large = steps(make(n)), steps(make(2 * n))
        assert small > 0
        assert large <= 2.2 * small, f"{family}: {small} steps for {n} characters, {large} for {2 * n}"


def test_a_live_chunker_fed_a_run_of_stops_works_linearly() -> None:
    def fed(n: int) -> int:
        before, chunker = spent(), Chunker()
        for _ in range(n // 1000):
            chunker.feed("." * 1000)
        chunker.flush()
        return spent() - before

    assert fed(32_000) <= 2.2 * fed(16_000)
