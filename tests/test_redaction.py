"""Secrets in the configuration are never printed: the rules one by one, Config's repr, and the console script."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from indexlib.config import Config, SparkSettings, load_config
from indexlib.redaction import REDACTED, is_secret_key, redact_properties, redact_text, secret_values

SKIPINDEX = str(Path(sys.executable).with_name("skipindex"))


@pytest.mark.parametrize(
    "key, secret, rule",
    [
        ("s3.secret-access-key", True, "pyiceberg's S3 secret key"),
        ("s3.access-key-id", True, "the access key id goes with the secret: a `key` word"),
        ("s3.session-token", True, "a `token` word"),
        ("gcs.oauth2.token", True, "a `token` word"),
        ("adls.account-key", True, "a `key` word"),
        ("adls.sas-token.myaccount", True, "a `token` word, whatever follows"),
        ("token", True, "the REST catalog's bearer token"),
        ("credential", True, "the REST catalog's client id:secret"),
        ("client.secret", True, "a `secret` word"),
        ("header.Authorization", True, "an `authorization` word, any case"),
        ("AWS_SECRET_ACCESS_KEY", True, "delta-rs storage options: words split at `_`"),
        ("AWS_SESSION_TOKEN", True, "delta-rs storage options: words split at `_`"),
        ("azure_storage_account_key", True, "delta-rs storage options, lower case"),
        ("spark.hadoop.fs.s3a.secret.key", True, "Spark options: words split at `.`"),
        ("db.password", True, "a `password` word"),
        ("uri", False, "a URI is shown, with only its userinfo password hidden"),
        ("s3.endpoint", False, "endpoints are not secret"),
        ("s3.region", False, "regions are not secret"),
        ("AWS_ALLOW_HTTP", False, "flags are not secret"),
        ("warehouse", False, "locations are not secret"),
        ("spark.io.encryption.keySizeBits", False, "`key` must be a word of its own, not part of one"),
        ("monkeys", False, "`key` inside a word is not the word `key`"),
    ],
)
def test_which_property_names_hold_secrets(key, secret, rule):
    assert is_secret_key(key) is secret, f"{key}: {rule}"


@pytest.mark.parametrize(
    "text, secrets, expected, rule",
    [
        (
            "postgresql+psycopg2://user:pw0rd@db:5432/cat",
            (),
            "postgresql+psycopg2://user:***@db:5432/cat",
            "a URI's userinfo password is hidden, the user and host stay",
        ),
        ("mysql://u:a:b@h/db", (), "mysql://u:***@h/db", "a password may hold ':'"),
        ("could not parse postgresql//u:pw@h/db", (), "could not parse postgresql//u:***@h/db", "malformed URIs too"),
        ("abfs://container@account.dfs.core.windows.net/t", (), None, "a user without a password is not a secret"),
        ("http://host:8080/path@v2", (), None, "a port is not a password: '/' ends the userinfo"),
        (
            "401 for token abc123XYZ from the server",
            ("abc123XYZ",),
            "401 for token *** from the server",
            "a configured secret value is hidden wherever it appears in the text",
        ),
        (
            "keys k-123 and k-1234",
            ("k-1234", "k-123"),
            "keys *** and ***",
            "longest secret first: no half-hidden value",
        ),
        ("nothing to hide", ("",), None, "an empty secret hides nothing"),
    ],
)
def test_what_redact_text_hides(text, secrets, expected, rule):
    assert redact_text(text, secrets) == (text if expected is None else expected), rule


def test_secret_values_are_those_of_secret_keys_and_uri_passwords_raw_and_decoded():
    props = {"uri": "postgresql://u:p%40ss@h/db", "s3.secret-access-key": "SK", "s3.region": "eu-west-1", "token": ""}
    assert secret_values(props) == {"p%40ss", "p@ss", "SK"}, "the password as written and as a driver decodes it"
    assert redact_properties(props) == {
        "uri": "postgresql://u:***@h/db",
        "s3.secret-access-key": REDACTED,
        "s3.region": "eu-west-1",
        "token": REDACTED,
    }


SECRETS = ("pgPASSWORD-4711", "FAKE-S3-SECRET-0042", "FAKE-DELTA-SECRET-0043", "FAKE-SPARK-SECRET-0044")


def _conf_with_secrets(path: Path, catalog: str) -> Path:
    path.write_text(
        f"[catalog]\n{catalog}\n"
        f'"s3.secret-access-key" = "{SECRETS[1]}"\n'
        '[spark]\nmaster = "local[1]"\n'
        f'[spark.options]\n"spark.hadoop.fs.s3a.secret.key" = "{SECRETS[3]}"\n'
        f'[delta.storage_options]\nAWS_SECRET_ACCESS_KEY = "{SECRETS[2]}"\nAWS_REGION = "eu-west-1"\n'
    )
    return path


def test_config_repr_hides_every_secret(tmp_path):
    catalog = f'name = "c"\ntype = "sql"\nuri = "postgresql://skip:{SECRETS[0]}@127.0.0.1:1/db"'
    config = load_config(_conf_with_secrets(tmp_path / "conf.toml", catalog))
    shown = repr(config)
    for secret in SECRETS:
        assert secret not in shown, f"repr(Config) shows {secret}"
    assert "skip:***@127.0.0.1:1" in shown and "eu-west-1" in shown, "what is not secret is still shown"
    assert config.secrets() == set(SECRETS)


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([SKIPINDEX, *args], capture_output=True, text=True, timeout=300)


def test_a_catalog_that_cannot_load_is_one_line_without_the_password(tmp_path):
    # pyiceberg echoes a URI it cannot infer a catalog type from; the console script must not print it as given
    catalog = f'name = "prod"\nuri = "mysql://skipuser:{SECRETS[0]}@127.0.0.1:1/db"'
    conf = _conf_with_secrets(tmp_path / "conf.toml", catalog)
    done = _run("explain", "--conf", str(conf), "--table", "db.t", "--where", "a = 1")
    assert done.returncode == 2, done.stderr
    assert "cannot load catalog 'prod'" in done.stderr and "skipuser:***@127.0.0.1:1" in done.stderr, done.stderr
    for secret in SECRETS:
        assert secret not in done.stdout + done.stderr, f"{secret} printed: {done.stderr}"


def test_a_catalog_refusing_connections_prints_no_secret(tmp_path):
    # a PostgreSQL catalog on a closed port: whatever pyiceberg / SQLAlchemy say, no secret in the one line
    catalog = f'name = "prod"\ntype = "sql"\nuri = "postgresql+psycopg2://skipuser:{SECRETS[0]}@127.0.0.1:1/db"'
    conf = _conf_with_secrets(tmp_path / "conf.toml", catalog)
    done = _run("stats", "--conf", str(conf), "--table", "db.t")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    for secret in SECRETS:
        assert secret not in done.stdout + done.stderr, f"{secret} printed: {done.stderr}"


@pytest.mark.parametrize(
    "props, shown, secrets, rule",
    [
        (
            {"s3": {"secret-access-key": "SK-1", "region": "eu-west-1"}},
            {"s3": {"secret-access-key": REDACTED, "region": "eu-west-1"}},
            {"SK-1"},
            "a key split by dots (TOML's nesting of an unquoted dotted key) is judged by its joined name",
        ),
        (
            {"spark": {"hadoop": {"fs": {"s3a": {"secret": {"key": "SK-2"}}}}}},
            {"spark": {"hadoop": {"fs": {"s3a": {"secret": {"key": REDACTED}}}}}},
            {"SK-2"},
            "however deep the nesting",
        ),
        (
            {"jdbc": {"uri": "postgresql://u:pw-3@h/db"}},
            {"jdbc": {"uri": "postgresql://u:***@h/db"}},
            {"pw-3"},
            "a URI password in a nested table",
        ),
        ({"token": 4711}, {"token": REDACTED}, {"4711"}, "a non-string value of a secret key"),
        (
            {"credential": ["client-id", "client-SECRET-5"]},
            {"credential": REDACTED},
            {"['client-id', 'client-SECRET-5']", "client-id", "client-SECRET-5"},
            "an array under a secret key: the whole and each element, wherever a message quotes one",
        ),
        (
            {"uris": ["postgresql://u:pw-6@h/db"]},
            {"uris": "['postgresql://u:***@h/db']"},
            {"pw-6"},
            "a URI password in an array",
        ),
    ],
)
def test_nested_and_malformed_property_tables_are_redacted(props, shown, secrets, rule):
    assert redact_properties(props) == shown, rule
    assert secret_values(props) == secrets, rule


def test_a_config_holding_a_nested_table_shows_no_secret_in_its_repr(tmp_path):
    # the loader refuses nested property tables, but a Config built in code may still hold one
    config = Config(
        path=tmp_path / "conf.toml",
        catalog_name="c",
        catalog_properties={"s3": {"secret-access-key": SECRETS[1]}},  # type: ignore[dict-item]
        spark=SparkSettings.model_construct(options={"spark.hadoop.fs.s3a": {"secret.key": SECRETS[3]}}),
    )
    shown = repr(config)
    for secret in (SECRETS[1], SECRETS[3]):
        assert secret not in shown, f"repr(Config) shows {secret}"
    assert config.secrets() == {SECRETS[1], SECRETS[3]}, "the nested secrets are known, for redact_text"


@pytest.mark.parametrize(
    "conf, rule",
    [
        (f'[catalog]\ntype = "sql"\ns3.secret-access-key = "{SECRETS[1]}"\n', "an unquoted dotted key in [catalog]"),
        (f'[catalog]\ntype = "sql"\n[catalog.s3]\nsecret-access-key = "{SECRETS[1]}"\n', "a [catalog.s3] table"),
        (
            f'[catalog]\ntype = "sql"\n[spark.options]\nspark.hadoop.fs.s3a.secret.key = "{SECRETS[3]}"\n',
            "an unquoted dotted key in [spark.options]",
        ),
        (
            f'[catalog]\ntype = "sql"\n[delta.storage_options]\naws.secret = "{SECRETS[2]}"\n',
            "an unquoted dotted key in [delta.storage_options]",
        ),
        (f'[catalog]\ntype = "sql"\ncredential = ["id", "{SECRETS[1]}"]\n', "an array where one value is expected"),
        (f'[catalog]\ntype = "sql"\n[catalgo]\ntoken = "{SECRETS[1]}"\n', "a secret under a misspelt section"),
        (f'[catalog]\ntype = "sql"\n[spark]\nmaster = {{ password = "{SECRETS[3]}" }}\n', "a table for a value"),
        (f'[catalog]\ntype = "sql"\n"s3.secret-access-key" = "{SECRETS[1]}\n', "malformed TOML (no closing quote)"),
    ],
)
def test_a_misshapen_config_file_is_one_line_without_the_secret(tmp_path, conf, rule):
    path = tmp_path / "conf.toml"
    path.write_text(conf)
    done = _run("explain", "--conf", str(path), "--table", "db.t", "--where", "a = 1")
    assert done.returncode == 2, f"{rule}: exit code {done.returncode}: {done.stderr}"
    assert len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith("skipindex: error: config file"), (
        f"{rule}: one line naming the file: {done.stderr}"
    )
    for secret in SECRETS:
        assert secret not in done.stdout + done.stderr, f"{rule}: {secret} printed: {done.stderr}"


@pytest.mark.parametrize("shape", ["a", "a:", ":", "a:a@", "a@", ":a", "user:pw@"])
def test_redaction_takes_linear_time(shape):
    """The URI-password pattern backtracked quadratically: 65 KB of `a` took 25 s (a request path in an access log
    line held the service's event loop), so 1 MB would take over an hour. Linear, 1 MB takes ~50 ms; the bound is
    far from both, so a loaded machine cannot fail it and a quadratic pattern cannot pass it (a termination check,
    not a speed target)."""
    import time

    text = shape * (1_000_000 // len(shape))
    started = time.perf_counter()
    redact_text(text, {"a-configured-secret"})
    assert time.perf_counter() - started < 30, f"1 MB of {shape!r} is redacted in linear time"


def test_redacted_text_is_cut_after_redaction():
    text = "x" * 50 + "postgresql://u:hunter2@h/db" + "y" * 100
    shown = redact_text(text, {"hunter2"}, limit=60)
    assert "hunter2" not in shown and "hunt" not in shown, "cut after redacting: no head of a secret survives"
    assert shown.endswith("more characters)") and len(shown) < 90
