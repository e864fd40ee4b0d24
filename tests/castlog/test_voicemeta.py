"""A voice id's language, gender and display name, and the order pickers show voices in."""

from __future__ import annotations

import pytest

from castlog import describe_voice, voice_order


@pytest.mark.parametrize(("voice", "language", "lang", "gender", "name"), [
    ("af_heart", "American English", "en-US", "female", "Heart"),
    ("am_michael", "American English", "en-US", "male", "Michael"),
    ("bf_emma", "British English", "en-GB", "female", "Emma"),
    ("bm_george", "British English", "en-GB", "male", "George"),
    ("jf_alpha", "Japanese", "ja", "female", "Alpha"),
    ("jm_kumo", "Japanese", "ja", "male", "Kumo"),
    ("zf_xiaoxiao", "Mandarin", "zh", "female", "Xiaoxiao"),
    ("ef_dora", "Spanish", "es", "female", "Dora"),
    ("ff_siwis", "French", "fr", "female", "Siwis"),
    ("hm_omega", "Hindi", "hi", "male", "Omega"),
    ("im_nicola", "Italian", "it", "male", "Nicola"),
    ("pm_santa", "Brazilian Portuguese", "pt-BR", "male", "Santa"),
])
def test_the_id_names_language_gender_and_name(voice: str, language: str, lang: str, gender: str, name: str) -> None:
    info = describe_voice(voice)
    assert (info.language, info.lang, info.gender, info.name) == (language, lang, gender, name)
    assert info.id == voice


@pytest.mark.parametrize("voice", ["narrator", "xf_odd", "a_b", "afx_heart"])
def test_ids_outside_the_scheme_say_unknown_and_keep_their_name(voice: str) -> None:
    info = describe_voice(voice)
    assert info.language == "Unknown" and info.lang == "" and info.gender == ""
    assert info.name


def test_english_comes_first_then_languages_by_name() -> None:
    voices = ["zf_xiaobei", "jf_alpha", "bm_george", "narrator", "ef_dora", "af_heart", "am_adam", "ff_siwis"]
    assert sorted(voices, key=voice_order) == [
        "af_heart", "am_adam", "bm_george", "ff_siwis", "jf_alpha", "zf_xiaobei", "ef_dora", "narrator",
    ]
