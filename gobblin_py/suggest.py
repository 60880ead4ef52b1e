""""did you mean …": the one place that suggests a known name for a misspelled key, class alias or dataset."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def close_matches(word: str, known: Iterable[str]) -> list[str]:
    """The names of `known` closest to `word` (difflib's ratio at least 0.6, case ignored): the best one, and
    any other as close (`'files'` for `filez`; `'a' or 'b'` only when both are as likely)."""
    by_lower: dict[str, str] = {}
    for name in sorted({k for k in known if isinstance(k, str) and k != word}):
        by_lower.setdefault(name.lower(), name)
    target = word.lower()
    scored = []
    for lower in difflib.get_close_matches(target, list(by_lower), n=3, cutoff=0.6):
        scored.append((difflib.SequenceMatcher(None, target, lower).ratio(), by_lower[lower]))
    return [name for ratio, name in scored if ratio >= scored[0][0] - 0.02]


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """`did you mean 'source'?` (or `'a' or 'b'`) for the known names close to `word`; "" when none is."""
    matches = close_matches(word, known)
    return f"did you mean {' or '.join(repr(m) for m in matches)}?" if matches else ""
