"""The settings reader behind every service's config: typed reads, defaults for unset and blank
variables, and refusals that name the variable."""

from __future__ import annotations

import math

import pytest

from servicekit import ConfigError, Settings, comma_list, comma_set, flag, require_non_negative, require_positive


def test_unset_and_blank_variables_give_the_default() -> None:
    env = Settings({"BLANK": "   ", "EMPTY": ""})
    assert env.get("UNSET", int, 7) == 7
    assert env.get("BLANK", int, 7) == 7
    assert env.get("EMPTY", str, "x") == "x"


def test_values_are_parsed_after_stripping_blanks() -> None:
    env = Settings({"PORT": " 8081 ", "RATE": "2.5", "LEVEL": " debug", "HOST": "0.0.0.0\n"})
    assert env.get("PORT", int, 0) == 8081
    assert env.get("RATE", float, 1.0) == 2.5
    assert env.get("LEVEL", str.upper, "INFO") == "DEBUG"
    assert env.get("HOST", str, "127.0.0.1") == "0.0.0.0"


def test_a_default_of_none_makes_an_optional_setting() -> None:
    env = Settings({"THREADS": "4"})
    assert env.get("THREADS", int, None) == 4
    assert env.get("MODEL_DIR", str, None) is None


def test_a_value_the_parser_refuses_is_a_config_error_naming_the_variable_and_value() -> None:
    env = Settings({"INTAKE_PORT": " eighty "})
    with pytest.raises(ConfigError) as caught:
        env.get("INTAKE_PORT", int, 8081)
    message = str(caught.value)
    assert message.startswith("INTAKE_PORT=' eighty ' is not valid: ")
    assert "invalid literal for int()" in message
    assert isinstance(caught.value, ValueError)  # callers that catch ValueError still do


def test_comma_lists_drop_blanks_and_keep_order() -> None:
    assert comma_list(" af_bella, am_adam ,,af_bella ") == ("af_bella", "am_adam", "af_bella")
    assert comma_list(" , ") == ()
    assert comma_set("10.0.0.1, 10.0.0.2,10.0.0.1") == frozenset({"10.0.0.1", "10.0.0.2"})
    env = Settings({"VOICES": "a,b", "IPS": "::1, 127.0.0.1"})
    assert env.get("VOICES", comma_list, ("x",)) == ("a", "b")
    assert env.get("IPS", comma_set, frozenset()) == frozenset({"::1", "127.0.0.1"})


@pytest.mark.parametrize(("raw", "value"), [("1", True), ("TRUE", True), ("yes", True), ("On", True),
                                            ("0", False), ("false", False), ("NO", False), ("off", False)])
def test_flags_read_the_usual_spellings(raw: str, value: bool) -> None:
    assert Settings({"DEBUG": raw}).get("DEBUG", flag, not value) is value


def test_a_flag_that_is_neither_true_nor_false_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"DEBUG='maybe' is not valid: expected one of .*true"):
        Settings({"DEBUG": "maybe"}).get("DEBUG", flag, False)


def test_require_positive_names_the_first_setting_at_or_below_zero() -> None:
    require_positive({"A": 1, "B": 0.5})
    with pytest.raises(ConfigError, match=r"^B must be greater than 0, not 0$"):
        require_positive({"A": 1, "B": 0, "C": -1})
    with pytest.raises(ConfigError, match=r"^RATE must be greater than 0, not -2.5$"):
        require_positive({"RATE": -2.5})
    with pytest.raises(ConfigError, match="^RATE "):
        require_positive({"RATE": math.nan})


def test_require_non_negative_allows_zero_and_names_a_negative_setting() -> None:
    require_non_negative({"WAIT": 0, "MORE": 3})
    with pytest.raises(ConfigError, match=r"^MAX_WAITING must be 0 or more, not -1$"):
        require_non_negative({"WAIT": 0, "MAX_WAITING": -1})
