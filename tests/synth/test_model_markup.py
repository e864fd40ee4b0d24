"""Text as an LLM writes it: markdown, URLs, e-mail addresses, emoji and symbols read as words,
with each word still pointing at what the client sent (synth/model/markup.py, normalize.py)."""

from __future__ import annotations

import re

import listening
import pytest

from synth.model import Synthesizer
from synth.model.english import EnglishG2P
from synth.model.mapped import Mapped
from synth.model.markup import clean_markup
from synth.model.normalize import normalize_english, normalize_mapped

MARKDOWN = """## Release notes

Here is **bold**, *italic*, __strong__ and `code_span` text, plus a [link](https://example.org/docs).
![A happy cat](cat.png)

- First item
- Second item: see https://www.github.com/streamtts/streamtts/issues?q=1.
1. Write to jo.doe@example.com 🎉

> Quoted words.

```python
print("hi")
```

| Name | Age |
|------|-----|
| Ann  | 42  |
"""
# What no listener should hear when markdown is read.
SYMBOL_WORDS = frozenset("asterisk asterisks star stars hash hashtag pound underscore backtick backticks "
                         "bracket brackets slash pipe http https www tilde greater".split())


@pytest.mark.rule("markup-read-as-text")
@pytest.mark.parametrize(("written", "read"), [
    ("**bold** and __strong__ and *it* and _it_", "bold and strong and it and it"),
    ("# Title\nText.", "Title. Text."),
    ("- one\n- two!\n3. three", "one. two! three."),
    ("a [link](https://x.org/a) and ![alt text](i.png)", "a link and alt text"),
    ("run `pip install x` now", "run pip install x now"),
    ("```bash\nls -la\n```", "ls -la"),
    ("> quoted", "quoted"),
    ("---\nafter", "after"),
    ("| a | b |\n|---|---|\n| c | d |", "a, b c, d"),
    ("nice 🎉👍🏽 work", "nice work"),
    ("<b>bold</b> tag", "bold tag"),
    (r"a \*literal\* star", "a literal star"),
    ("snake_case_name", "snake_case_name"),
    ("**Bold across. Two sentences.", "Bold across. Two sentences."),  # a chunk cut inside emphasis
    ("the end**", "the end"),
])
def test_markdown_marks_go_and_their_words_stay(written: str, read: str) -> None:
    assert " ".join(clean_markup(written).text.split()) == read


@pytest.mark.rule("markup-read-as-text")
@pytest.mark.parametrize(("written", "read"), [
    ("see https://www.github.com/a/b?c=1.", "see github dot com."),
    ("at www.example.org today", "at example dot org today"),
    ("mail jo.doe@example.com now", "mail jo dot doe at example dot com now"),
    ("A → B", "A to B"),
    ("~3 km", "about three km"),
    ("2 * 3", "two times three"),
    ("x ≥ 4 and y ≈ 5", "x at least four and y about five"),
    ("snake_case", "snake case"),
])
def test_urls_addresses_and_symbols_are_read_as_words(written: str, read: str) -> None:
    assert normalize_english(written) == read


def test_the_offset_map_points_every_character_at_the_original() -> None:
    text = "Costs **$5** in 1999."
    spoken = normalize_mapped(clean_markup(text))
    assert spoken.text == "Costs five dollars in nineteen ninety-nine."
    for word, original in [("five", "$5"), ("dollars", "$5"), ("nineteen", "1999"), ("in", "in")]:
        at = spoken.text.index(word)
        start, end = spoken.span(at, at + len(word))
        assert text[start:end] == original
    assert Mapped.of("abc").span(1, 2) == (1, 2)


@pytest.mark.rule("words-as-written")
def test_the_english_g2p_gives_words_as_the_client_wrote_them() -> None:
    _, tokens = EnglishG2P().tokens("In **1999** see [the docs](https://x.org) at https://www.github.com/a.")
    words = [w for w, _ in tokens if any(c.isalnum() for c in w)]
    assert words == ["In", "1999", "see", "the", "docs", "at", "https://www.github.com/a"]


@pytest.mark.model
@pytest.mark.rule("markup-read-as-text")
@pytest.mark.timeout(900)
def test_markdown_read_aloud_has_no_symbol_in_it(synthesizer: Synthesizer) -> None:
    cast = listening.read_as_cast(synthesizer, MARKDOWN, "af_heart")
    heard = listening.transcribe(cast.pcm)
    said = set(re.findall(r"[a-z]+", heard.lower()))
    assert not said & SYMBOL_WORDS, heard
    for word in ("release", "bold", "italic", "link", "cat", "item", "github", "example", "quoted", "print"):
        assert word in said, heard


@pytest.mark.model
@pytest.mark.rule("words-as-written")
def test_timed_words_of_markdown_point_at_the_written_words(synthesizer: Synthesizer) -> None:
    _, words = synthesizer.synthesize_timed("It is **2024** now, see https://example.org.", "af_heart")
    assert [w for w, _, _ in words] == ["It", "is", "2024", "now", "see", "https://example.org"]
