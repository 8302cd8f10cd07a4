"""The API's tokens: one per client the user let in, by name, kept hashed in the config
folder (api_tokens.json), so the file gives nobody a token.

A token is 32 random bytes (URL-safe text); the file keeps its SHA-256, which is as good
as a slow hash for a secret this long (nothing to guess), and every check compares
digests in constant time. Tokens are made by the person at the app: approving a client's
request in the window (or headless's /approve), or `lipsync-studio api token create
NAME` at a terminal. Revoking removes the entry; a running server rereads the file when
it changes (`changed`) and closes the connections of a token that is gone.

Saves go through app/config_files.py: a kill mid-save leaves the old file or the new one.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from app.config_files import read_json, write_json

TOKENS_FILE = "api_tokens.json"
TOKENS_VERSION = 1
NAME_MAX = 64


class TokenError(ValueError):
    """A token name or operation the user must fix; one line."""


@dataclass(frozen=True, slots=True)
class TokenEntry:
    name: str
    digest: str  # SHA-256 of the token, hex
    created: float  # Unix seconds


def check_name(name: str) -> str:
    """The name, stripped; TokenError for an empty, long or unprintable one."""
    name = name.strip() if isinstance(name, str) else ""
    if not name or len(name) > NAME_MAX or not name.isprintable():
        raise TokenError(f"a client's name is 1 to {NAME_MAX} printable characters, not {name!r}")
    return name


def _digest(token: str) -> str:
    # surrogatepass: a client's JSON may hold a lone surrogate ("\ud800"), and a header
    # bytes that are not UTF-8; no token of ours has either, so it matches none.
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


class TokenStore:
    """The tokens in `path`. Read once at creation and again by `reload`; every change
    is saved at once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.problem: str | None = None  # why the file was not read (None: it was)
        self._entries: dict[str, TokenEntry] = {}
        self._stamp: tuple[int, int, int] | None = None
        self.reload()

    def names(self) -> list[TokenEntry]:
        return sorted(self._entries.values(), key=lambda entry: entry.created)

    def create(self, name: str) -> str:
        """A new token for `name` (TokenError if that name has one: revoke it first)."""
        name = check_name(name)
        if name in self._entries:
            raise TokenError(f"a token named {name!r} exists already: revoke it first "
                             f"(lipsync-studio api token revoke {name!r}) or choose another name")
        token = secrets.token_urlsafe(32)
        self._entries[name] = TokenEntry(name, _digest(token), time.time())
        self._save()
        return token

    def revoke(self, name: str) -> bool:
        """Whether `name` had a token (which is gone now)."""
        if self._entries.pop(name.strip(), None) is None:
            return False
        self._save()
        return True

    def check(self, token: str | None) -> str | None:
        """The name whose token `token` is, or None."""
        if not token:
            return None
        digest = _digest(token)
        found = None
        for entry in self._entries.values():  # every entry compared: no early exit
            if hmac.compare_digest(entry.digest, digest):
                found = entry.name
        return found

    def changed(self) -> bool:
        """Whether the file changed since it was last read or written (another process:
        `api token revoke` at a terminal); then it is read again."""
        if self._file_stamp() == self._stamp:
            return False
        self.reload()
        return True

    def reload(self) -> None:
        self._stamp = self._file_stamp()
        data = read_json(self.path)
        self.problem = None
        if data is None:
            if self.path.exists():
                self.problem = f"{self.path} is unreadable: no client can sign in until it is fixed"
            self._entries = {}
            return
        entries = data.get("tokens") if isinstance(data, dict) else None
        if not isinstance(entries, list):
            self.problem = f"{self.path} is not a token file: no client can sign in"
            self._entries = {}
            return
        self._entries = {}
        for item in entries:
            if (isinstance(item, dict) and isinstance(item.get("name"), str)
                    and isinstance(item.get("sha256"), str)):
                created = item.get("created")
                self._entries[item["name"]] = TokenEntry(
                    item["name"], item["sha256"], float(created) if isinstance(created, int | float) else 0.0)

    def _save(self) -> None:
        write_json(self.path, {"version": TOKENS_VERSION, "tokens": [
            {"name": e.name, "sha256": e.digest, "created": e.created} for e in self.names()]})
        self._stamp = self._file_stamp()

    def _file_stamp(self) -> tuple[int, int, int] | None:
        # Each save is a new file (a rename), so its inode tells a change that kept the
        # size within the clock's resolution.
        try:
            stat = self.path.stat()
        except OSError:
            return None
        return stat.st_ino, stat.st_mtime_ns, stat.st_size
