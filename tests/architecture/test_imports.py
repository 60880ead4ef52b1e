"""Imports point one way: api ← builtin ← runtime, cli on top (README "Architecture"); a new edge against it fails here."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "gobblin_py"

SHARED = {"errors", "durable", "checked_json", "fs", "plugins", "cron", "crashpoints", "suggest"}
"""Small helpers any layer may use (they import nothing of the layers themselves)."""

MAY_IMPORT: dict[str, set[str]] = {
    "api": {"api", "errors"},
    "fs": {"fs", "errors", "durable", "checked_json", "crashpoints", "api"},
    "builtin": {"builtin", "api", *SHARED},
    "commit": {"commit", "api", "config", "state", *SHARED},
    "state": {"state", "api", *SHARED},
    "config": {"config", "api", "builtin", "state", *SHARED},
    "runtime": {"runtime", "api", "builtin", "commit", "config", "state", *SHARED},
    "testing": {"testing", "api", "builtin", "commit", "config", "runtime", "state", *SHARED},
    "cli": {"cli", "api", "builtin", "commit", "config", "runtime", "state", "testing", *SHARED},
}

KNOWN: dict[tuple[str, str], str] = {
}
"""Edges against the rule that are being removed, each with where it goes; nothing may be added here."""


def _layer(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imported_layers(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
        for name in names:
            parts = name.split(".")
            if parts[0] == "gobblin_py" and len(parts) > 1:
                found.add(parts[1])
    return found


def _violations() -> dict[tuple[str, str], str]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        layer = _layer(path)
        allowed = MAY_IMPORT.get(layer)
        if allowed is None:
            continue
        for imported in _imported_layers(path) - allowed - {layer}:
            out[(path.relative_to(PACKAGE).as_posix(), imported)] = f"{layer} must not import {imported}"
    return out


def test_every_layer_imports_only_what_is_below_it() -> None:
    found = _violations()
    new = {edge: why for edge, why in found.items() if edge not in KNOWN}
    assert not new, "imports against the layering: " + "; ".join(f"{f} imports gobblin_py.{m} ({why})" for (f, m), why in new.items())


def test_the_known_exceptions_still_exist_so_the_list_only_shrinks() -> None:
    gone = [edge for edge in KNOWN if edge not in _violations()]
    assert not gone, f"remove these from KNOWN, they are fixed: {gone}"
