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

Redaction runs on text a client can choose (a request path in an access log line, a value echoed in an error), so it
takes time linear in the text: each secret is one `str.replace`, and a URI password is found from the runs of text
that end at an '@' (each run read once, never re-read from every position it holds, which is what made the one
regular expression this used to be quadratic: a 65 KB path held a server's event loop for 10 s). `limit` shortens
the redacted text after redaction, never before (a cut made first could leave the head of a secret unredacted).
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
# from the ':' after the user to the '@' (RFC 3986 lets '@' and '/' appear in it only percent-encoded). A userinfo is
# a whole run of characters other than whitespace, quotes, '/' and '@' that an '@' ends: the lookbehind starts a run
# only where one begins and the possessive `++` never gives characters back, so each run is read once (linear time).
_USERINFO = re.compile(r"(?<![^\s/@'\"])[^\s/@'\"]++(?=@)")


def is_secret_key(key: str) -> bool:
    """True when a property named `key` holds a secret (a secret word in its name)."""
    return any(word in SECRET_WORDS for word in _WORD_SPLIT.split(key.lower()))


def _password_spans(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of each URI password in `text`: in a userinfo run, what follows the first ':' that comes after
    the user (a non-empty run of characters other than ':'), when something follows it."""
    for match in _USERINFO.finditer(text):
        run, start = match.group(), match.start()
        user_at = len(run) - len(run.lstrip(":"))
        colon = run.find(":", user_at)
        if colon > user_at and colon < len(run) - 1:
            yield start + colon + 1, match.end()


def _hide_passwords(text: str) -> str:
    parts, last = [], 0
    for start, end in _password_spans(text):
        parts += [text[last:start], REDACTED]
        last = end
    return "".join(parts) + text[last:] if parts else text


# In data a catalog keeps about its namespaces (not configuration), `key` alone is a word of schemas (`primary.key`,
# `sort.key`): there only a key these words qualify is a credential (`adls.account-key`, `secret.key`, `api_key`)
_CREDENTIAL_KEY_QUALIFIERS = frozenset({"access", "account", "api", "encryption", "master", "private", "sas", "secret"})


def is_credential_name(key: str) -> bool:
    """True when a namespace property named `key` holds a credential: a secret word other than `key` in its name
    (`secret`, `password`, `token`, ...), or `key` after one of the qualifying words above."""
    words = [w for w in _WORD_SPLIT.split(key.lower()) if w]
    if any(word in SECRET_WORDS - {"key"} for word in words):
        return True
    return any(b == "key" and a in _CREDENTIAL_KEY_QUALIFIERS for a, b in zip(words, words[1:], strict=False))


def redact_namespace_properties(props: Mapping[str, str], secrets: Iterable[str]) -> dict[str, str]:
    """A namespace's properties as a catalog client may see them: every property the upstream catalog keeps, with
    the values of credential names (`is_credential_name`) hidden, and in every other value the configured `secrets`
    and any URI password (`redact_text`)."""
    secrets = set(secrets)
    return {k: REDACTED if is_credential_name(k) else redact_text(str(v), secrets) for k, v in props.items()}


def uri_passwords(value: str) -> list[str]:
    """The passwords in the userinfo of the URIs in `value`."""
    return [value[start:end] for start, end in _password_spans(value)]


def redact_value(key: str, value: str) -> str:
    """`value` as it may be shown: all of it hidden under a secret key, else with any URI password hidden."""
    if is_secret_key(key):
        return REDACTED
    return _hide_passwords(value)


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


def redact_text(text: str, secrets: Iterable[str] = (), limit: int | None = None) -> str:
    """`text` with every one of `secrets` (longest first) and every URI password replaced by `***`; then, with
    `limit`, shortened to about that many characters (`shorten`)."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    text = _hide_passwords(text)
    return text if limit is None else shorten(text, limit)


def shorten(text: str, limit: int) -> str:
    """`text` cut to its first `limit` characters, saying how many were left out (client input in a log line or an
    error message is bounded: a 1 MB path is not worth 1 MB of log)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"
