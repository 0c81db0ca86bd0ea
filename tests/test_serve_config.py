"""`[serve]` in the configuration: checked like every section, the token a secret that no repr or message shows."""

from __future__ import annotations

import pytest

from indexlib.config import load_config
from indexlib.errors import UserError

BASE = '[catalog]\nname = "test"\ntype = "sql"\nuri = "sqlite:///catalog.db"\nwarehouse = "warehouse"\n'


def conf(tmp_path, text: str):
    path = tmp_path / "conf.toml"
    path.write_text(BASE + text)
    return load_config(path)


def test_defaults_and_token_from_the_environment(tmp_path, monkeypatch):
    serve = conf(tmp_path, "").serve
    assert (serve.host, serve.port, serve.tasks_per_batch) == ("127.0.0.1", 8181, 1000)
    monkeypatch.delenv("SKIPINDEX_SERVE_TOKEN", raising=False)
    with pytest.raises(UserError, match=r"needs a bearer token: set \$SKIPINDEX_SERVE_TOKEN"):
        serve.resolve_token()
    monkeypatch.setenv("SKIPINDEX_SERVE_TOKEN", "short")
    with pytest.raises(UserError, match="at least 16 characters"):
        serve.resolve_token()
    monkeypatch.setenv("SKIPINDEX_SERVE_TOKEN", "a-long-enough-token-42")
    assert serve.resolve_token() == "a-long-enough-token-42"


def test_a_configured_token_is_a_secret(tmp_path):
    config = conf(tmp_path, '[serve]\ntoken = "configured-token-0123456789"\nport = 9000\n')
    assert config.serve.resolve_token() == "configured-token-0123456789"
    assert "configured-token-0123456789" in config.secrets()
    assert "configured-token-0123456789" not in repr(config)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[serve]\ntasks_per_batc = 3\n", "did you mean serve.tasks_per_batch"),
        ("[serve]\nport = 70000\n", "serve.port must be at most 65535"),
        ("[serve]\ntasks_per_batch = 0\n", "serve.tasks_per_batch must be an integer >= 1"),
        ('[serve]\ntoken = ""\n', "serve.token must be a non-empty string"),
        ("[serve]\nhandles_kept = 0\n", "serve.handles_kept must be an integer >= 1"),
        ("[serve]\nplan_workers = -1\n", "serve.plan_workers must be an integer >= 0"),
        ('[serve]\nplan_workers = "2"\n', "serve.plan_workers must be an integer >= 0"),
        ("[serve]\nplans_kept_bytes = 0\n", "serve.plans_kept_bytes must be an integer >= 1"),
        ("[serve]\nidle_timeout_seconds = -1\n", "serve.idle_timeout_seconds must be an integer >= 1"),
        ("[serve]\nmax_header_bytes = 10\n", "serve.max_header_bytes must be an integer >= 1024"),
        ("[serve]\nmax_request_bytes = 1000\nmax_response_bytes = 1500\n", "at least twice serve.max_request_bytes"),
    ],
)
def test_bad_settings_are_one_line_errors(tmp_path, text, message):
    with pytest.raises(UserError, match=message) as raised:
        conf(tmp_path, text)
    assert "\n" not in str(raised.value)
