"""G2P: offline, numbers as words, and only symbols the model knows."""

from __future__ import annotations

import sys

import pytest

from synth.model.g2p import G2P
from synth.model.normalize import normalize_english


@pytest.fixture(scope="module")
def g2p(vocab: dict[str, int]) -> G2P:
    return G2P(vocab)


def test_tricky_text_phonemizes_without_unknown_symbols(
    g2p: G2P, vocab: dict[str, int], texts: dict[str, str]
) -> None:
    for paragraph in texts["tricky"].split("\n\n"):
        raw = g2p.raw(paragraph, "af_heart")
        unknown = {c for c in raw if c not in vocab and not c.isspace()}
        assert not unknown, (paragraph, unknown)
        assert g2p(paragraph, "af_heart") or not paragraph.strip()


@pytest.mark.parametrize(("text", "words"), [
    ("3.14159", "three point one four one five nine"),
    ("1/3 and 3/4", "one third and three quarters"),
    ("42%", "forty-two percent"),
    ("#7", "number seven"),
    ("at 10:45 p.m.", "at ten forty-five p.m."),
    ("on 2026-11-29", "on November twenty-ninth, twenty twenty-six"),
    ("$0.99, $5, $1.50", "ninety-nine cents, five dollars, one dollar and fifty cents"),
    ("£3.20 or €2.5 million", "three pounds and twenty pence or two point five million euros"),
    ("-17 degrees", "minus seventeen degrees"),
    ("1st, 2nd, 3rd, 21st", "first, second, third, twenty-first"),
    ("100,000,000", "one hundred million"),
    ("in 1999 and the 1990s", "in nineteen ninety-nine and the nineteen nineties"),
    ("pages 10-20", "pages ten to twenty"),
    ("105 people", "one hundred five people"),
])
def test_numbers_currency_dates_and_times_become_words(text: str, words: str) -> None:
    assert normalize_english(text) == words


def test_british_numbers_keep_and_and_day_first_dates() -> None:
    assert normalize_english("105 on 29/11/2026", british=True) == (
        "one hundred and five on the twenty-ninth of November twenty twenty-six"
    )


@pytest.mark.parametrize(("text", "words"), [
    ("Mr. Smith and Mrs. Jones", "Mister Smith and Missus Jones"),
    ("Dr. Who on Elm Dr.", "Doctor Who on Elm Drive."),
    ("St. Patrick on Main St. today", "Saint Patrick on Main Street today"),
    ("e.g. this, i.e. that, etc.", "for example this, that is that, et cetera."),
])
def test_abbreviations_are_read_as_words(text: str, words: str) -> None:
    assert normalize_english(text) == words


def test_normalized_text_has_no_digits_left(texts: dict[str, str]) -> None:
    assert not any(c.isdigit() for c in normalize_english(texts["tricky"]))


def test_lexicon_words_get_stress_and_sentence_punctuation(g2p: G2P) -> None:
    assert g2p("Hello there, world!", "af_heart") == "həlˈO ðˈɛɹ, wˈɜɹld!"


def test_british_voice_reads_british_english(g2p: G2P) -> None:
    american, british = g2p("water", "af_heart"), g2p("water", "bf_emma")
    assert american != british
    assert "ː" in british and "ɹ" not in british


def test_unknown_word_is_read_by_espeak(g2p: G2P) -> None:
    phonemes = g2p("Kubernetes", "af_heart")
    assert len(phonemes) > 6 and "ˈ" in phonemes


def test_accented_word_is_read_as_its_english_spelling(g2p: G2P) -> None:
    assert g2p("café", "af_heart") == g2p("cafe", "af_heart")


def test_foreign_script_words_are_read_not_spelled_letter_by_letter(g2p: G2P) -> None:
    moscow = g2p("Москва", "af_heart")
    assert 0 < len(moscow) < 12  # spelled out, "em o es ka ..." would be four times longer


def test_emoji_are_silent(g2p: G2P) -> None:
    assert g2p("😀 🎧", "af_heart") == ""


def test_misaki_import_leaves_no_fake_spacy_behind() -> None:
    spacy = sys.modules.get("spacy")
    assert spacy is None or getattr(spacy, "__file__", None) is not None


def test_japanese_voice_reads_english_text_in_english(g2p: G2P) -> None:
    assert g2p.language("Hello there.", "jf_alpha") == "en-us"
    assert g2p("Hello there.", "jf_alpha") == g2p("Hello there.", "af_heart")


def test_japanese_voice_reads_japanese_text_with_the_japanese_g2p(g2p: G2P, vocab: dict[str, int]) -> None:
    # "ja" only with the Japanese G2P at hand: the synth extra installs pyopenjtalk-plus, sudachipy, sudachidict-core
    assert g2p.language("こんにちは。", "jf_alpha") == "ja"
    raw = g2p.raw("東京は晴れです。彁。", "jf_alpha")  # 彁: a kanji only Sudachi knows
    assert raw.startswith("toːkʲoː") and all(c in vocab or c == " " for c in raw)


def test_espeak_languages_keep_their_punctuation(g2p: G2P) -> None:
    phonemes = g2p("Hola, amigo.", "ef_dora")
    assert phonemes.endswith(".") and ", " in phonemes


# The language is chosen per sentence (a j voice): English sentences stay English around a kanji.
MIXED = "東京は晴れです。 I had a café in 東京 yesterday."


def test_one_kanji_in_an_english_sentence_leaves_the_sentence_english(g2p: G2P) -> None:
    assert g2p.language("東京", "jf_alpha") == "ja"  # the synth extra installs the Japanese G2P
    sentence = "I had a café in 東京 yesterday."
    assert g2p.language(sentence, "jf_alpha") == "en-us"
    phonemes = g2p(sentence, "jf_alpha")
    assert phonemes == g2p(sentence, "af_heart") == "ˌI hæd ɐ kæfˈA ɪn toːkʲoː jˈɛstəɹdˌA."
    assert "ɕiːeːeɸɯ" not in phonemes  # café, not "c-a-f-e" read by the Japanese reader


def test_each_sentence_of_a_mixed_chunk_goes_to_its_own_reader(g2p: G2P) -> None:
    phonemes = g2p(MIXED, "jf_alpha")
    japanese, english = g2p("東京は晴れです。", "jf_alpha"), g2p("I had a café in 東京 yesterday.", "af_heart")
    assert japanese == "toːkʲoː βa haɾe desɨ."
    assert phonemes == f"{japanese} {english}"


@pytest.mark.parametrize("sentence", ["東京は晴れです。", "私はcaféが好きです。", "こんにちは"])
def test_japanese_sentences_for_a_j_voice_still_go_to_the_japanese_reader(g2p: G2P, sentence: str) -> None:
    assert g2p.language(sentence, "jf_alpha") == "ja"
    assert g2p.language(sentence, "af_heart") == "en-us"  # an English voice reads them as foreign words


@pytest.mark.parametrize("word", ["zorblatting", "quixotry", "Kubernetes", "Zelenskyy", "flibbertigibbetish"])
def test_words_the_lexicon_lacks_are_read_as_one_word_not_spelled(g2p: G2P, vocab: dict[str, int], word: str) -> None:
    phonemes = g2p(word, "af_heart")
    assert phonemes and " " not in phonemes and "ˈ" in phonemes  # one stressed word
    assert len(phonemes) <= 2 * len(word)  # spelled out, each letter would take a syllable
    assert all(c in vocab for c in phonemes)
    assert g2p(word, "jf_alpha") == phonemes  # the same English reading for a Japanese voice
