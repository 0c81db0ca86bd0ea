"""Secrets in the configuration never reach a log line, an error message or a repr.

Two rules decide what is secret:

- a property whose name has a secret word in it (the name split at `.`, `-`, `_` and compared lower-case):
  `secret`, `password`, `passwd`, `pwd`, `token`, `credential(s)`, `key`, `authorization`, `signature` — so
  `s3.secret-access-key`, `s3.access-key-id`, `s3.session-token`, `adls.account-key`, `adls.sas-token.<account>`,
  `gcs.oauth2.token`, `token`, `credential`, `client.secret`, `header.Authorization`, `AWS_SECRET_ACCESS_KEY`,
  `AWS_SESSION_TOKEN`, `spark.hadoop.fs.s3a.secret.key`: the whole value is secret;
- the password of a URI's userinfo (`postgresql+psycopg2://user:PASSWORD@host/db`), in any value and any text:
  whatever stands between `user:` and `@`.

`redact_properties` applies them to a property table; `redact_text` removes the configured secret values themselves
(as found by the rules, raw and percent-decoded) and any URI password from free text, such as an exception message
from pyiceberg, SQLAlchemy or delta-rs that echoes what it was given.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import unquote

REDACTED = "***"

SECRET_WORDS = frozenset(
    {"secret", "password", "passwd", "pwd", "token", "credential", "credentials", "key", "authorization", "signature"}
)
_WORD_SPLIT = re.compile(r"[.\-_\s]+")
# user:password@ (in scheme://user:password@host, and in a malformed URI a driver echoes back): the password runs
# from the ':' after the user to the '@' (RFC 3986 lets '@' and '/' appear in it only percent-encoded)
_URI_PASSWORD = re.compile(r"(?P<head>[^\s:/@'\"]+:)(?P<password>[^\s/@'\"]+)(?=@)")


def is_secret_key(key: str) -> bool:
    """True when a property named `key` holds a secret (a secret word in its name)."""
    return any(word in SECRET_WORDS for word in _WORD_SPLIT.split(key.lower()))


def uri_passwords(value: str) -> list[str]:
    """The passwords in the userinfo of the URIs in `value`."""
    return [m.group("password") for m in _URI_PASSWORD.finditer(value)]


def redact_value(key: str, value: str) -> str:
    """`value` as it may be shown: all of it hidden under a secret key, else with any URI password hidden."""
    if is_secret_key(key):
        return REDACTED
    return _URI_PASSWORD.sub(lambda m: m.group("head") + REDACTED, value)


def redact_properties(props: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A copy of a property table that may be printed. A nested table (an unquoted dotted key, which TOML nests)
    is redacted under its joined name: `s3` / `secret-access-key` is `s3.secret-access-key`, a secret."""
    return {
        key: redact_properties(value, f"{prefix}{key}.")
        if isinstance(value, Mapping)
        else redact_value(f"{prefix}{key}", str(value))
        for key, value in props.items()
    }


def secret_values(props: Mapping[str, Any]) -> set[str]:
    """The values `redact_text` must remove: those of secret keys and URI passwords, raw and percent-decoded; in
    nested tables (under their joined names) and in arrays (each element too) alike."""
    found: set[str] = set()
    for key, value in _leaves(props):
        if is_secret_key(key) and value:
            found.add(value)
        found.update(uri_passwords(value))
    return (found | {unquote(s) for s in found}) - {""}


def _leaves(props: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, str]]:
    """(joined name, value as text) of every value in a property table, its nested tables and its arrays."""
    for key, value in props.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from _leaves(value, f"{name}.")
        elif isinstance(value, list | tuple):
            yield name, str(value)
            for item in value:
                yield from _leaves({key: item}, prefix)
        else:
            yield name, str(value)


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with every one of `secrets` (longest first) and every URI password replaced by `***`."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return _URI_PASSWORD.sub(lambda m: m.group("head") + REDACTED, text)
