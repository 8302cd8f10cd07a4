"""The obs-websocket password: in the system keyring where one is usable (python
`keyring`: Secret Service, KWallet, macOS Keychain, Windows Credential Locker), otherwise
in `config_dir()/obs-password`, readable and writable by the user alone (mode 0600).

Invariant: a password is in one place at a time. Saving to the keyring removes the file
(no plain-text copy stays behind); the file is written only when the keyring cannot take it.
"""

from __future__ import annotations

import os
from pathlib import Path

import keyring
import keyring.errors

from app.settings import config_dir

SERVICE = "lipsync-studio"
ACCOUNT = "obs-websocket"


class CredentialError(Exception):
    """The password could not be stored or read; the message says where and why."""


def password_file() -> Path:
    return config_dir() / "obs-password"


def _usable_keyring():
    """The keyring backend, or None when there is none that stores anything: keyring
    falls back to its `fail` backend (priority 0) without a D-Bus session, for instance."""
    backend = keyring.get_keyring()
    module = type(backend).__module__
    if module.endswith((".fail", ".null")) or getattr(backend, "priority", 0) <= 0:
        return None
    return backend


def save_password(password: str) -> str:
    """Store ``password``; returns one line saying where, for the user."""
    backend = _usable_keyring()
    if backend is not None:
        try:
            backend.set_password(SERVICE, ACCOUNT, password)
        except keyring.errors.KeyringError as exc:
            reason = f"the system keyring refused it ({exc})"
        else:
            try:
                password_file().unlink()
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise CredentialError(f"cannot remove the old {password_file()}: {exc.strerror}") from None
            return f"saved the OBS password in the system keyring ({type(backend).__name__})"
    else:
        reason = "no system keyring"
    path = password_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, 0o600)  # an older file may have been made with a looser mode
            os.write(fd, password.encode("utf-8"))
        finally:
            os.close(fd)
    except OSError as exc:
        raise CredentialError(f"cannot store the OBS password in {path}: {exc.strerror}") from None
    return f"{reason}; stored in {path} readable only by you"


def load_password() -> str | None:
    """The saved password, or None when none was saved."""
    backend = _usable_keyring()
    if backend is not None:
        try:
            found = backend.get_password(SERVICE, ACCOUNT)
        except keyring.errors.KeyringError:
            found = None
        if found is not None:
            return found
    try:
        return password_file().read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise CredentialError(f"cannot read the OBS password from {password_file()}: {exc}") from None
