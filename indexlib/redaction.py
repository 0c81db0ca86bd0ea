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
from collections.abc import Iterable, Mapping
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


def redact_properties(props: Mapping[str, str]) -> dict[str, str]:
    """A copy of a property table that may be printed."""
    return {key: redact_value(key, str(value)) for key, value in props.items()}


def secret_values(props: Mapping[str, str]) -> set[str]:
    """The values `redact_text` must remove: those of secret keys and URI passwords, raw and percent-decoded."""
    found: set[str] = set()
    for key, value in props.items():
        value = str(value)
        if is_secret_key(key) and value:
            found.add(value)
        found.update(uri_passwords(value))
    return (found | {unquote(s) for s in found}) - {""}


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with every one of `secrets` (longest first) and every URI password replaced by `***`."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return _URI_PASSWORD.sub(lambda m: m.group("head") + REDACTED, text)
