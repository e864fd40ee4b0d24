"""Settings from the environment, declared once: a field names its variable, default and bounds.

In the spirit of starlette's ``config("KEY", cast=int, default=...)``, one line per setting::

    @dataclass(frozen=True)
    class Config(Settings):
        port: int = setting("EDGE_PORT", 8082, gt=0, doc="where it listens")

The field's type says how the text is read (``int``, ``float``, ``str``, ``bool`` as a flag,
``frozenset[str]`` as a comma-separated set, ``X | None`` for an optional one); ``parse=`` says
otherwise where it must (``str.upper``). ``Config.from_env()`` reads every declared field, and a
field whose type is itself a ``Settings`` is read as a group (``X | None``: None while its
required settings are unset). Constructing one checks every bound, so a test's
``Config(port=0)`` is refused as ``EDGE_PORT=0`` would be. A refusal is a ``ConfigError`` naming
the variable, its value and what is allowed. A variable no longer read stays named in the class's
``removed`` with what to do instead: set, it stops the start. ``scripts/settings_doc.py`` writes the README's
settings tables from the same declarations.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass
from typing import Any, ClassVar, Generic, TypeVar, overload

from .address import UNIX_PEER
from .connect import DEFAULT_URL

T = TypeVar("T")
S = TypeVar("S", bound="Settings")

# Spellings of a flag, compared case-insensitively; anything else is refused, not guessed.
TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off"})
_KEY = "servicekit.setting"  # where a field's metadata holds its Setting


class ConfigError(ValueError):
    """A setting that a service cannot use; the message names the variable and what is wrong."""


def comma_list(raw: str) -> tuple[str, ...]:
    """A comma-separated list of names: blanks around them and empty items dropped, order kept."""
    return tuple(name.strip() for name in raw.split(",") if name.strip())


def comma_set(raw: str) -> frozenset[str]:
    """A comma-separated set of names (as ``comma_list``, order and repeats dropped)."""
    return frozenset(comma_list(raw))


def networks(raw: str) -> frozenset[str]:
    """Comma-separated addresses or networks (CIDR), each checked (a typo stops the start, not a
    request); ``none``: no address at all."""
    if raw.strip().lower() == "none":
        return frozenset()
    names = comma_set(raw)
    for name in names:
        ipaddress.ip_network(name, strict=False)  # a ValueError names the bad one
    return names


def proxies(raw: str) -> frozenset[str]:
    """``networks``, and ``unix``: a peer on a Unix socket (servicekit.address)."""
    names = comma_set(raw)
    unix = names & {UNIX_PEER}
    return networks(",".join(names - unix) or "none") | unix


def flag(raw: str) -> bool:
    """``1/true/yes/on`` or ``0/false/no/off`` in any case (``bool(raw)`` would take "false" as true)."""
    word = raw.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ValueError(f"expected one of {', '.join(sorted(TRUE_WORDS | FALSE_WORDS))}")


# How a field's type reads its text when the declaration names no parser.
PARSERS: dict[object, Callable[[str], Any]] = {
    str: str, int: int, float: float, bool: flag, frozenset[str]: comma_set, tuple[str, ...]: comma_list,
}


@dataclass(frozen=True)
class Setting(Generic[T]):
    """One environment variable: its name, default, bounds and the line the docs give it."""

    env: str
    default: T | Any = MISSING  # MISSING: required (a group with one is None while it is unset)
    doc: str = ""
    gt: float | None = None  # the value must be greater than this
    ge: float | None = None  # ... or at least this
    le: float | None = None  # ... and at most this
    parse: Callable[[str], Any] | None = None  # None: by the field's type (PARSERS)
    factory: Callable[[], T] | None = None  # a default made per instance (a process's name)
    fallback: str | None = None  # a second variable read when ``env`` is unset
    shown: str | None = None  # the default as the docs write it, where the value would mislead
    secret: bool = False  # kept out of the repr (and so out of logs)
    min_len: int | None = None  # a key or token: each at least this many characters (a guess costs more)

    def field(self) -> T:
        """This setting as a dataclass field (``name: int = Setting(...).field()``)."""
        meta, shown = {_KEY: self}, not self.secret
        if self.factory is not None:
            return dataclasses.field(default_factory=self.factory, repr=shown, metadata=meta)
        if self.default is MISSING:
            return dataclasses.field(repr=shown, metadata=meta)  # type: ignore[no-any-return]
        return dataclasses.field(default=self.default, repr=shown, metadata=meta)  # type: ignore[no-any-return]

    def parsed(self, raw: str, hint: Any) -> Any:
        """The variable's text read as the field's type (``hint``), or the declared ``parse``."""
        try:
            return parser_of(self, hint)(raw)
        except ValueError as exc:
            raise ConfigError(f"{self.env}={raw!r} is not valid: {exc}") from exc

    def check(self, value: object, hint: Any) -> None:
        """Refuse a value out of bounds, or not among a ``Literal``'s choices (NaN is refused too)."""
        inner, _ = optional_of(hint)
        choices = typing.get_args(inner) if typing.get_origin(inner) is typing.Literal else ()
        if choices and value not in choices:
            raise ConfigError(f"{self.env}={value!r} is not valid: it must be one of {', '.join(map(str, choices))}")
        if self.gt is not None and isinstance(value, (int, float)) and not value > self.gt:
            raise ConfigError(f"{self.env}={value!r} is out of range: it must be greater than {self.gt:g}")
        if self.min_len is not None:
            values = value if isinstance(value, frozenset) else {value}
            short = [v for v in values if v and len(str(v)) < self.min_len]  # empty: unset
            if short:  # never echo a secret
                raise ConfigError(f"{self.env} holds a value shorter than {self.min_len} characters; use a random "
                                  "one: python -c 'import secrets; print(secrets.token_urlsafe(32))'")
        if self.ge is not None and isinstance(value, (int, float)) and not value >= self.ge:
            raise ConfigError(f"{self.env}={value!r} is out of range: it must be {self.ge:g} or more")
        if self.le is not None and isinstance(value, (int, float)) and not value <= self.le:
            raise ConfigError(f"{self.env}={value!r} is out of range: it must be {self.le:g} or less")


@overload
def setting(env: str, default: T, *, doc: str, gt: float | None = None, ge: float | None = None, le: float | None = None,
            parse: Callable[[str], Any] | None = None, fallback: str | None = None, shown: str | None = None,
            secret: bool = False, min_len: int | None = None) -> T: ...
@overload
def setting(env: str, *, doc: str, factory: Callable[[], T], shown: str | None = None) -> T: ...
@overload
def setting(env: str, *, doc: str, shown: str | None = None) -> Any: ...
def setting(env: str, default: Any = MISSING, **declared: Any) -> Any:
    """A field read from ``env``: the one line that declares it (see the module's docstring)."""
    return Setting(env, default, **declared).field()


# The shortest key or token taken (STREAMTTS_API_KEYS, STREAMTTS_ADMIN_TOKEN): 32 characters.
MIN_SECRET_CHARS = 32

# Settings more than one service reads, declared here once.
REDIS_URL: Setting[str] = Setting(
    "REDIS_URL", DEFAULT_URL, doc="the Redis every service talks through (`redis://user:password@host:port/db`)")
CONTENT_KEY: Setting[str] = Setting(
    "STREAMTTS_CONTENT_KEY", "", secret=True, min_len=MIN_SECRET_CHARS, shown="unset (plain SHA-256); "
    "`streamtts up`: made once in the state dir", doc="the deployment's secret key of content ids (HMAC-SHA256): "
    "an id then tells nobody without it whether a guessed text was cast. intake and synth need the same one; "
    "changing it makes the next identical submit a new cast (existing links keep working)")
ADMIN_TOKEN: Setting[str | None] = Setting(
    "STREAMTTS_ADMIN_TOKEN", None, secret=True, min_len=MIN_SECRET_CHARS, doc="enables `DELETE /api/casts/{id}` "
    "with `Authorization: Bearer <token>` (404 without): intake checks the request and asks the workers, a "
    "worker deletes only what this token asked for (intake's Redis user deletes nothing); intake and synth need "
    "the same one")
API_KEYS: Setting[frozenset[str]] = Setting(
    "STREAMTTS_API_KEYS", frozenset(), shown="empty (no auth)", secret=True, min_len=MIN_SECRET_CHARS,
    doc="comma-separated keys (each of 32 characters or more: shorter ones refuse to start): when set, `/v1/*` "
        "and the submits want `Authorization: Bearer <key>` (401 otherwise), and so do reads of the general "
        "durable streams (`/v1/stream/*` but `casts/`); intake and edge need the same ones")
FORWARDED_ALLOW_IPS: Setting[frozenset[str]] = Setting(
    "FORWARDED_ALLOW_IPS", frozenset({"127.0.0.1", "::1"}), parse=proxies,
    doc="addresses or networks (CIDR) of proxies whose `X-Forwarded-For` intake and edge believe, "
        "for per-client rate limits; `unix`: a peer on the Unix socket of `INTAKE_SOCKET`/`EDGE_SOCKET` "
        "(`streamtts up` sets only that)")


Declared = tuple[tuple[dataclasses.Field[Any], "Setting[Any] | None", Any], ...]
_DECLARED: dict[type, Declared] = {}  # read once per class: every construction checks the fields


def declared(cls: type) -> Declared:
    """Each field of a settings class: the field, its Setting (None: a group or not read) and its type."""
    if cls not in _DECLARED:
        hints = typing.get_type_hints(cls)
        _DECLARED[cls] = tuple((f, f.metadata.get(_KEY), hints[f.name]) for f in dataclasses.fields(cls))
    return _DECLARED[cls]


def optional_of(hint: Any) -> tuple[Any, bool]:
    """``X | None`` -> (X, True); anything else -> (it, False)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(hint)) == 2:
            return args[0], True
    return hint, False


def group_of(hint: Any) -> tuple[type[Settings] | None, bool]:
    """The Settings class a field holds (None: it is no group) and whether it may be None."""
    inner, optional = optional_of(hint)
    return (inner, optional) if isinstance(inner, type) and issubclass(inner, Settings) else (None, optional)


def parser_of(s: Setting[Any], hint: Any) -> Callable[[str], Any]:
    if s.parse is not None:
        return s.parse
    inner, _ = optional_of(hint)
    if typing.get_origin(inner) is typing.Literal:
        return str
    if inner not in PARSERS:
        raise TypeError(f"{s.env}: no parser for {inner!r}; declare one with parse=")
    return PARSERS[inner]


def raw_of(s: Setting[Any], environ: Mapping[str, str]) -> str | None:
    """The variable's text, blanks stripped; None when it is unset or blank (then: the default)."""
    for name in (s.env, s.fallback):
        raw = environ.get(name) if name else None
        if raw is not None and raw.strip():
            return raw.strip()
    return None


def read(cls: type[S], environ: Mapping[str, str]) -> S:
    """An instance of ``cls`` from ``environ``: declared fields set there, the rest their defaults."""
    for name, instead in cls.removed.items():
        if (environ.get(name) or "").strip():
            raise ConfigError(f"{name} was removed: {instead}; unset it")
    values: dict[str, Any] = {}
    for f, s, hint in declared(cls):
        group, optional = group_of(hint)
        if group is not None:
            values[f.name] = None if optional and not any_required_set(group, environ) else read(group, environ)
        elif s is not None and (raw := raw_of(s, environ)) is not None:
            values[f.name] = s.parsed(raw, hint)
        elif s is not None and s.default is MISSING and s.factory is None:
            raise ConfigError(f"{s.env} is required")
    return cls(**values)


def any_required_set(cls: type[Settings], environ: Mapping[str, str]) -> bool:
    """Whether a group's required settings are set (an optional group is None until they are)."""
    return any(raw_of(s, environ) is not None for _, s, _ in declared(cls)
               if s is not None and s.default is MISSING and s.factory is None)


class Settings:
    """The base of a frozen dataclass of settings: ``from_env`` and the checks come from its fields."""

    # Variables no longer read -> what to do instead. One still set stops the start: ignored, it
    # would quietly change what its operator asked for.
    removed: ClassVar[Mapping[str, str]] = {}

    def __post_init__(self) -> None:
        for f, s, hint in declared(type(self)):
            if s is not None and (value := getattr(self, f.name)) is not None:
                s.check(value, hint)

    @classmethod
    def from_env(cls: type[S], environ: Mapping[str, str] | None = None) -> S:
        """Every declared setting from ``environ`` (default: the process's environment)."""
        return read(cls, os.environ if environ is None else environ)


def declaration(cls: type[Settings], name: str) -> Setting[Any]:
    """The Setting behind field ``name`` of ``cls``: its variable's name for whoever sets it for a child."""
    return next(s for f, s, _ in declared(cls) if f.name == name and s is not None)


def value_of(cls: type[Settings], name: str, environ: Mapping[str, str]) -> Any:
    """Field ``name`` of ``cls`` as ``environ`` sets it, checked, without reading the others."""
    s, hint = next((s, hint) for f, s, hint in declared(cls) if f.name == name and s is not None)
    raw = raw_of(s, environ)
    if raw is None:
        return s.factory() if s.factory is not None else s.default
    value = s.parsed(raw, hint)
    s.check(value, hint)
    return value
