"""The declared settings behind every service's config: one line per setting gives ``from_env``,
the bounds and the docs; a refusal names the variable, its value and what is allowed."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Literal

import pytest

from servicekit import ConfigError, Settings, setting
from servicekit.settings import Setting, comma_list, comma_set, declaration, flag, networks, raw_of, value_of

ANSWER = Setting("ANSWER", 42, doc="shared by two groups")


@dataclass(frozen=True)
class Store(Settings):
    url: str = setting("STORE_URL", doc="required: the group is None while it is unset")
    region: str = setting("STORE_REGION", "here", doc="a default")


@dataclass(frozen=True)
class Inner(Settings):
    delay_s: float = setting("INNER_DELAY_S", 1.5, ge=0, doc="at least 0")


@dataclass(frozen=True)
class Example(Settings):
    port: int = setting("EX_PORT", 8080, gt=0, doc="a positive int")
    rate: float = setting("EX_RATE", 2.5, gt=0, doc="a positive float")
    waiting: int = setting("EX_WAITING", 10, ge=0, doc="0 or more")
    level: str = setting("EX_LEVEL", "INFO", parse=str.upper, fallback="LEVEL", doc="with a fallback")
    debug: bool = setting("EX_DEBUG", False, doc="a flag")
    ips: frozenset[str] = setting("EX_IPS", frozenset({"::1"}), doc="a set")
    voices: tuple[str, ...] = setting("EX_VOICES", (), doc="a list")
    threads: int | None = setting("EX_THREADS", None, gt=0, doc="optional")
    mode: Literal["a", "b"] = setting("EX_MODE", "a", parse=str.lower, doc="a choice")
    name: str = setting("EX_NAME", factory=lambda: "made", doc="a default made per instance")
    token: str | None = setting("EX_TOKEN", None, secret=True, doc="kept out of the repr")
    answer: int = ANSWER.field()
    store: Store | None = None
    inner: Inner = field(default_factory=Inner)
    not_read: int = 7  # no declaration: not a setting


def test_unset_and_blank_variables_give_the_defaults() -> None:
    cfg = Example.from_env({"EX_PORT": "   ", "EX_RATE": ""})
    assert cfg == Example()
    assert (cfg.port, cfg.rate, cfg.level, cfg.threads, cfg.name, cfg.store, cfg.inner) == (
        8080, 2.5, "INFO", None, "made", None, Inner())


def test_values_are_parsed_by_the_fields_type_after_stripping_blanks() -> None:
    cfg = Example.from_env({"EX_PORT": " 8081 ", "EX_RATE": "0.5", "EX_LEVEL": " debug", "EX_DEBUG": "yes",
                            "EX_IPS": "10.0.0.1, ::1,10.0.0.1", "EX_VOICES": " b, a ,,b", "EX_THREADS": "4",
                            "EX_MODE": "B", "EX_NAME": "box-1", "ANSWER": "7", "INNER_DELAY_S": "0"})
    assert (cfg.port, cfg.rate, cfg.level, cfg.debug, cfg.threads, cfg.mode, cfg.name) == (
        8081, 0.5, "DEBUG", True, 4, "b", "box-1")
    assert cfg.ips == frozenset({"10.0.0.1", "::1"}) and cfg.voices == ("b", "a", "b")
    assert cfg.answer == 7 and cfg.inner.delay_s == 0.0


def test_a_fallback_variable_is_read_when_the_first_is_unset() -> None:
    assert Example.from_env({"LEVEL": "warning"}).level == "WARNING"
    assert Example.from_env({"LEVEL": "warning", "EX_LEVEL": "error"}).level == "ERROR"


def test_an_optional_group_is_none_until_its_required_settings_are_set() -> None:
    assert Example.from_env({"STORE_REGION": "there"}).store is None
    assert Example.from_env({"STORE_URL": "s3://b/p"}).store == Store("s3://b/p", "here")
    with pytest.raises(ConfigError, match="^STORE_URL is required$"):
        Store.from_env({})


@dataclass(frozen=True)
class Retired(Settings):
    removed: ClassVar[Mapping[str, str]] = {"EX_OLD_MODE": "EX_MODE took its place"}
    mode: str = setting("EX_MODE", "a", doc="the setting that stays")


@dataclass(frozen=True)
class Holder(Settings):
    retired: Retired = field(default_factory=Retired)


def test_a_removed_variable_still_set_stops_the_start_and_says_what_took_its_place() -> None:
    with pytest.raises(ConfigError, match="^EX_OLD_MODE was removed: EX_MODE took its place; unset it$"):
        Retired.from_env({"EX_OLD_MODE": "b", "EX_MODE": "b"})
    with pytest.raises(ConfigError, match="^EX_OLD_MODE was removed"):  # in a group too
        Holder.from_env({"EX_OLD_MODE": "b"})
    assert Retired.from_env({"EX_OLD_MODE": "  ", "EX_MODE": "b"}).mode == "b"  # blank: unset


def test_a_value_the_parser_refuses_names_the_variable_and_value() -> None:
    with pytest.raises(ConfigError) as caught:
        Example.from_env({"EX_PORT": " eighty "})
    assert str(caught.value).startswith("EX_PORT='eighty' is not valid: invalid literal for int()")
    assert isinstance(caught.value, ValueError)  # callers that catch ValueError still do
    with pytest.raises(ConfigError, match=r"^EX_DEBUG='maybe' is not valid: expected one of .*true"):
        Example.from_env({"EX_DEBUG": "maybe"})
    with pytest.raises(ConfigError, match=r"^EX_MODE='c' is not valid: it must be one of a, b$"):
        Example.from_env({"EX_MODE": "C"})


@pytest.mark.parametrize(("env", "message"), [
    ({"EX_PORT": "0"}, "EX_PORT=0 is out of range: it must be greater than 0"),
    ({"EX_RATE": "-2.5"}, "EX_RATE=-2.5 is out of range: it must be greater than 0"),
    ({"EX_RATE": "nan"}, "EX_RATE=nan is out of range: it must be greater than 0"),
    ({"EX_WAITING": "-1"}, "EX_WAITING=-1 is out of range: it must be 0 or more"),
    ({"EX_THREADS": "0"}, "EX_THREADS=0 is out of range: it must be greater than 0"),
    ({"INNER_DELAY_S": "-0.5"}, "INNER_DELAY_S=-0.5 is out of range: it must be 0 or more"),
])
def test_a_value_out_of_bounds_names_the_variable_its_value_and_the_range(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Example.from_env(env)
    assert str(caught.value) == message


def test_constructing_checks_the_bounds_as_the_environment_would() -> None:
    Example(waiting=0)
    with pytest.raises(ConfigError, match="^EX_WAITING=-1 is out of range"):
        Example(waiting=-1)
    with pytest.raises(ConfigError, match="^EX_RATE=nan "):
        Example(rate=math.nan)


def test_secrets_stay_out_of_the_repr() -> None:
    assert "hunter2" not in repr(Example(token="hunter2")) and "port=8080" in repr(Example())


def test_one_setting_is_read_through_its_declaration() -> None:
    assert declaration(Example, "port").env == "EX_PORT"
    assert value_of(Example, "port", {}) == 8080 and value_of(Example, "port", {"EX_PORT": "9"}) == 9
    assert value_of(Example, "name", {}) == "made"
    with pytest.raises(ConfigError, match="^EX_PORT=0 is out of range"):
        value_of(Example, "port", {"EX_PORT": "0"})
    assert raw_of(ANSWER, {"ANSWER": " 1 "}) == "1" and raw_of(ANSWER, {"ANSWER": " "}) is None


def test_comma_lists_and_flags() -> None:
    assert comma_list(" af_bella, am_adam ,,af_bella ") == ("af_bella", "am_adam", "af_bella")
    assert comma_list(" , ") == ()
    assert comma_set("10.0.0.1, 10.0.0.2,10.0.0.1") == frozenset({"10.0.0.1", "10.0.0.2"})
    assert [flag(w) for w in ("1", "TRUE", "yes", "On", "0", "false", "NO", "off")] == [True] * 4 + [False] * 4


@pytest.mark.rule("secrets-long")
def test_keys_and_tokens_shorter_than_32_characters_refuse_to_start() -> None:
    """#21 finding 8: any key or token was taken, however short."""
    from intake.config import Config as IntakeConfig
    from servicekit import ConfigError

    long_key = "x" * 32
    for environ in ({"STREAMTTS_API_KEYS": f"{long_key},short"}, {"STREAMTTS_ADMIN_TOKEN": "admin"}):
        with pytest.raises(ConfigError, match="shorter than 32") as refused:
            IntakeConfig.from_env(environ)
        assert "short" not in str(refused.value).replace("shorter", "") and "admin" not in str(refused.value)
    cfg = IntakeConfig.from_env({"STREAMTTS_API_KEYS": long_key, "STREAMTTS_ADMIN_TOKEN": long_key})
    assert cfg.api_keys == {long_key} and cfg.admin_token == long_key


def test_address_lists_are_checked_at_start_and_none_empties_them() -> None:
    """FORWARDED_ALLOW_IPS and INTAKE_WYOMING_ALLOW_FROM: a typo stops the start (it used to fail
    each forwarded request, or be ignored)."""
    from edge.config import Config as EdgeConfig
    from intake.config import Config as IntakeConfig

    assert networks("none") == frozenset()
    assert networks("10.0.0.0/8, ::1") == frozenset({"10.0.0.0/8", "::1"})
    for config in (IntakeConfig, EdgeConfig):
        assert config.from_env({"FORWARDED_ALLOW_IPS": "10.42.0.0/16"}).forwarded_allow_ips == {"10.42.0.0/16"}
        with pytest.raises(ConfigError, match="FORWARDED_ALLOW_IPS"):
            config.from_env({"FORWARDED_ALLOW_IPS": "10.42.0.0/33"})
    with pytest.raises(ConfigError, match="INTAKE_WYOMING_ALLOW_FROM"):
        IntakeConfig.from_env({"INTAKE_WYOMING_ALLOW_FROM": "10.0.0.300"})
