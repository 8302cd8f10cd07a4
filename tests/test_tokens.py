"""The API's tokens (app/api/tokens.py): kept hashed, checked in constant time, revoked,
and a change made by another process (the terminal's `api token revoke`) noticed."""

import json

import pytest

from app.api.tokens import TokenError, TokenStore


def test_a_token_is_kept_only_as_its_hash_and_checks_by_name(tmp_path):
    path = tmp_path / "api_tokens.json"
    store = TokenStore(path)
    token = store.create("My Bot")
    assert len(token) >= 40 and token not in path.read_text()
    saved = json.loads(path.read_text())
    assert saved["version"] == 1 and [t["name"] for t in saved["tokens"]] == ["My Bot"]
    assert store.check(token) == "My Bot"
    assert store.check(token + "x") is None and store.check("") is None and store.check(None) is None
    # Another store (another process) reads the same file.
    assert TokenStore(path).check(token) == "My Bot"


def test_names_are_checked_and_a_name_has_one_token(tmp_path):
    store = TokenStore(tmp_path / "t.json")
    store.create("bot")
    with pytest.raises(TokenError, match="exists already"):
        store.create("bot")
    for bad in ("", "   ", "x" * 65, "tab\there"):
        with pytest.raises(TokenError, match="1 to 64 printable"):
            store.create(bad)


def test_a_revoke_elsewhere_is_noticed_and_the_token_stops_working(tmp_path):
    path = tmp_path / "api_tokens.json"
    server = TokenStore(path)
    terminal = TokenStore(path)
    token = terminal.create("bot")
    assert server.check(token) is None  # not read yet
    assert server.changed() and server.check(token) == "bot"
    assert not server.changed()
    assert terminal.revoke("bot") and not terminal.revoke("bot")
    assert server.changed() and server.check(token) is None


def test_a_broken_file_lets_nobody_in_and_says_so(tmp_path):
    path = tmp_path / "api_tokens.json"
    path.write_text("{broken")
    store = TokenStore(path)
    assert store.problem and "unreadable" in store.problem and store.names() == []
    path.write_text("[]")
    assert "not a token file" in TokenStore(path).problem
