"""`${VAR}` and `${VAR:-default}` in job-file strings, from the environment, so passwords and per-environment
values stay out of YAML. `$${` writes a literal `${`. Values that land under a secret-looking key are
remembered, so no error message repeats them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gobblin_py.api.secrets import is_secret_key

_REF = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


@dataclass
class Substitution:
    """The job file with every reference replaced, what could not be, and the secret values to keep out of messages."""

    data: Any
    problems: list[tuple[str, str]] = field(default_factory=list)
    secrets: set[str] = field(default_factory=set)

    def redact(self, text: str) -> str:
        for value in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(value, "***")
        return text


def substitute(data: Any, environ: Mapping[str, str]) -> Substitution:
    """Replace `${VAR}` / `${VAR:-default}` in every string value (keys are left alone)."""
    out = Substitution(None)

    def one(text: str, key: str) -> str:
        def repl(m: re.Match[str]) -> str:
            if m.group(0) == "$${":
                return "${"
            name, default = m.group(1), m.group(2)
            value = environ.get(name)
            if value is None:
                if default is None:
                    out.problems.append((key, f"environment variable {name} is not set (write ${{{name}:-default}} for a default)"))
                    return m.group(0)
                value = default
            if is_secret_key(key.rsplit(".", 1)[-1]) and value:
                out.secrets.add(value)
            return value
        return _REF.sub(repl, text)

    def walk(value: Any, key: str) -> Any:
        if isinstance(value, str):
            return one(value, key)
        if isinstance(value, dict):
            return {k: walk(v, f"{key}.{k}" if key else str(k)) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, f"{key}[{i}]") for i, v in enumerate(value)]
        return value

    out.data = walk(data, "")
    return out
