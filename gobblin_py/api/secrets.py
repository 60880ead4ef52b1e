"""What counts as a secret in a plugin's settings: a value under a secret-looking key, or a URL carrying a password.
A publisher's settings are written into every commit record, so they must hold none: the job loader refuses them,
naming the key and never the value; a secret reaches a plugin through its environment (`password_env`, `${VAR}` under
a key of a source, a client's own variables)."""

from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import parse_qsl

_SECRET_KEY = re.compile(r"pass(word|wd|phrase)?|secret|token|credential|private.?key|api.?key|access.?key|account.?key"
                         r"|sasl|sas$|authori[sz]ation|signature|session.?key|cookie", re.IGNORECASE)
_USERINFO_PASSWORD = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^@\s]*:[^@\s]*@")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""An environment variable's name: what a `*_env` setting holds instead of the value."""


def is_secret_key(key: str) -> bool:
    """A setting whose value is a secret: `password`, `sasl_plain_password`, `adls.account-key`, `header.Authorization`,
    `client_secret` …; a `*_env` key names a variable and holds none."""
    return not key.lower().endswith("_env") and bool(_SECRET_KEY.search(key))


def url_secret(value: str) -> str | None:
    """Why the URL `value` carries a secret (a password in its user info, a secret-named query parameter), or None."""
    if "://" not in value:
        return None
    if _USERINFO_PASSWORD.match(value):
        return "a password in the URL's user info"
    _, _, query = value.partition("?")
    names = [name for name, _ in parse_qsl(query.partition("#")[0], keep_blank_values=True) if is_secret_key(name)]
    return f"a {names[0]!r} parameter in the URL" if names else None


def check_credentials(url: str, password_env: str | None) -> None:
    """A database source's `url` and `password_env` as its settings validator checks them: ValueError (never echoing a
    value) when the url holds a secret, or `password_env` is no variable's name or names one that is not set."""
    why = url_secret(url)
    if why is not None:
        raise ValueError(f"url holds a secret ({why}): remove it from the url and name the variable holding the "
                         "password in password_env")
    if password_env is not None and not ENV_NAME.fullmatch(password_env):
        raise ValueError("password_env must name an environment variable (letters, digits and _), not hold the password")
    if password_env is not None and password_env not in os.environ:
        raise ValueError("password_env: the environment variable it names is not set (its value is not repeated: it "
                         "must be the variable's name, not the password)")


def secret_paths(value: Any, key: str = "") -> list[tuple[str, str]]:
    """(key path, why) of every secret in `value` (settings as JSON values): never the secret itself."""
    found: list[tuple[str, str]] = []
    if isinstance(value, dict):
        for k, v in value.items():
            path = f"{key}.{k}" if key else str(k)
            if is_secret_key(str(k)) and v not in (None, "", [], {}):
                found.append((path, "a secret-looking key"))
            else:
                found.extend(secret_paths(v, path))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found.extend(secret_paths(v, f"{key}[{i}]"))
    elif isinstance(value, str):
        why = url_secret(value)
        if why is not None:
            found.append((key, why))
    return found
