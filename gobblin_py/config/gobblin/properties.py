"""Java `.properties` text → ordered entries, by the rules of `java.util.Properties.load`.

Gobblin reads its `.pull`/`.job`/`.properties` job files this way, so a file means here what it means there:
`key=value`, `key:value` or `key value`; `#`/`!` comment lines; a trailing `\\` continues the line;
`\\uXXXX`, `\\t`, `\\n`, `\\r`, `\\f` escapes. There are no inline comments: `a=b # c` sets `a` to `b # c`,
which is reported as a warning, since it is rarely what was meant.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gobblin_py.errors import ConfigError

_WHITESPACE = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


@dataclass(frozen=True)
class Entry:
    """One `key=value` of a file, with where it was written (`file:line`)."""

    key: str
    value: str
    origin: str


@dataclass(frozen=True)
class ParsedProperties:
    entries: list[Entry]
    warnings: list[str]


def read_text(path: Path) -> str:
    """A job file's text: UTF-8, or ISO-8859-1 (what `Properties.load(InputStream)` assumes) when not UTF-8."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("iso-8859-1")


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, logical line): continuations joined, comment and blank lines dropped."""
    natural = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    out: list[tuple[int, str]] = []
    i = 0
    while i < len(natural):
        start, line = i + 1, natural[i].lstrip(_WHITESPACE)
        i += 1
        if not line or line[0] in "#!":
            continue  # a comment line never continues, even when it ends with a backslash
        while _continues(line) and i < len(natural):
            line = line[:-1] + natural[i].lstrip(_WHITESPACE)
            i += 1
        if _continues(line):  # a backslash at the very end of the file is dropped
            line = line[:-1]
        out.append((start, line))
    return out


def _continues(line: str) -> bool:
    backslashes = len(line) - len(line.rstrip("\\"))
    return backslashes % 2 == 1


def _unescape(raw: str, where: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch != "\\" or i + 1 >= len(raw):
            out.append(ch)
            i += 1
            continue
        nxt = raw[i + 1]
        if nxt == "u":
            digits = raw[i + 2:i + 6]
            if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise ConfigError(f"{where}: malformed \\uxxxx escape {raw[i:i + 6]!r} (Java refuses this file too)")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def _split(line: str) -> tuple[str, str]:
    """The raw (still escaped) key and value of a logical line."""
    i, n = 0, len(line)
    while i < n:
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=:" or ch in _WHITESPACE:
            break
        i += 1
    key = line[:i]
    j = i
    while j < n and line[j] in _WHITESPACE:
        j += 1
    if j < n and line[j] in "=:":
        j += 1
        while j < n and line[j] in _WHITESPACE:
            j += 1
    return key, line[j:]


def parse_properties(text: str, file: str) -> ParsedProperties:
    """Every entry of a properties text in file order (a repeated key appears twice; the later wins)."""
    entries: list[Entry] = []
    warnings: list[str] = []
    for number, line in _logical_lines(text):
        where = f"{file}:{number}"
        raw_key, raw_value = _split(line)
        key, value = _unescape(raw_key, where), _unescape(raw_value, where)
        comment = _inline_comment(raw_value)
        if comment is not None:
            warnings.append(f"{where}: {key}: the value holds {comment!r}; Java properties have no inline comments, "
                            f"so Gobblin reads it as part of the value and so does gobblin-py (put the comment on its own line)")
        entries.append(Entry(key, value, where))
    return ParsedProperties(entries, warnings)


def _inline_comment(raw_value: str) -> str | None:
    """The ` # …` tail of a value, which Java keeps as part of it."""
    for i, ch in enumerate(raw_value):
        if ch == "#" and i > 0 and raw_value[i - 1] in _WHITESPACE:
            return raw_value[i:].strip()
    return None
