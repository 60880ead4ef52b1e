"""Imports point one way (CONTRIBUTING.md, "Layers"): api ← builtin ← runtime ← compaction, maintenance, scheduling ← cli, with
sub-rules inside builtin, and no import cycle anywhere in the package; a new edge against them fails here."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "gobblin_py"

SHARED = {"errors", "durable", "checked_json", "units", "fs", "plugins", "cron", "crashpoints", "suggest"}
"""Small helpers any layer may use (they import nothing of the layers themselves)."""

MAY_IMPORT: dict[str, set[str]] = {
    "api": {"api", "errors"},
    "units": set(),
    "fs": {"fs", "errors", "durable", "checked_json", "crashpoints", "api"},
    "builtin": {"builtin", "api", *SHARED},
    "commit": {"commit", "api", "config", "state", *SHARED},
    "state": {"state", "api", *SHARED},
    "config": {"config", "api", "builtin", "state", *SHARED},
    "runtime": {"runtime", "api", "commit", "config", "state", *SHARED},
    "compaction": {"compaction", "api", "commit", "config", "runtime", "state", *SHARED},
    "maintenance": {"maintenance", "api", "commit", "config", "runtime", "state", *SHARED},
    "scheduling": {"scheduling", "api", "commit", "compaction", "config", "maintenance", "runtime", "state", *SHARED},
    "operating": {"operating", "api", "commit", "config", "runtime", "scheduling", "state", *SHARED},
    "testing": {"testing", "api", "builtin", "commit", "config", "runtime", "state", *SHARED},
    "demo": {"demo", *SHARED},
    "cli": {"cli", "api", "builtin", "commit", "compaction", "config", "demo", "maintenance", "operating", "runtime", "scheduling", "state", "testing", *SHARED},
}
"""Top-level layer → the layers it may import."""

SUB_RULES: list[tuple[str, str, str]] = [
    ("builtin.sources", "builtin.writers", "a source hands records on; it never writes them"),
    ("builtin.sources", "builtin.publishers", "a source hands records on; it never publishes them"),
    ("builtin.sources", "builtin.converters", "what sources and converters share lives in builtin.schemas"),
    ("builtin.writers", "builtin.sources", "a writer takes records from any source"),
    ("builtin.writers", "builtin.publishers", "a publisher takes a writer's files, not the reverse"),
    ("builtin.converters", "builtin.sources", "a converter takes records from any source"),
    ("builtin.converters", "builtin.writers", "a converter hands records on; what it shares with writers lives in builtin.schemas"),
    ("builtin.schemas", "builtin.sources", "schemas are below every plugin"),
    ("builtin.schemas", "builtin.converters", "schemas are below every plugin"),
    ("builtin.schemas", "builtin.writers", "schemas are below every plugin"),
    ("builtin.schemas", "builtin.publishers", "schemas are below every plugin"),
    ("runtime.planning", "runtime.task", "the planner reads the job file; what it shares with tasks is in runtime.columnar"),
]
"""(importer prefix, imported prefix, why not): finer rules inside a layer; `connector_rules()` adds the connectors'."""

CONNECTOR_FAMILIES = ("builtin.sources", "builtin.publishers", "builtin.dead_letter")
"""Where connectors live: each package below one is a connector, each module beside them a helper they share."""


def connector_rules() -> list[tuple[str, str, str]]:
    """Found, not listed, so that a connector added tomorrow is held to them: one connector never imports another
    (of its family or another: what two share goes below them, in builtin.schemas or a shared module), and a module
    the connectors of a family share imports none of them."""
    packages: list[str] = []
    shared: list[str] = []
    for family in CONNECTOR_FAMILIES:
        folder = PACKAGE.joinpath(*family.split("."))
        packages += [f"{family}.{p.name}" for p in sorted(folder.iterdir()) if (p / "__init__.py").is_file()]
        shared += [f"{family}.{p.stem}" for p in sorted(folder.glob("*.py")) if p.stem != "__init__"]
    rules = [(a, b, "one connector never imports another") for a in packages for b in packages if a != b]
    rules += [(m, c, "a module the connectors share imports none of them") for m in shared for c in packages]
    return rules

CONFIG_MAY_IMPORT_BUILTIN = {"config/gobblin/source.py"}
"""config imports no plugin, except the Gobblin translator's source section, which maps Gobblin's classes onto them."""


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """The gobblin_py modules `path` imports (without the `gobblin_py.` prefix), at module level, inside functions
    or under `if TYPE_CHECKING:`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            if name.startswith("gobblin_py."):
                found.add(name.removeprefix("gobblin_py."))
    return found


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The module `name` denotes (`from a.b import c` may name module a.b.c or attribute c of a.b)."""
    return name if name in modules else None


def _edges() -> dict[str, set[str]]:
    modules = _modules()
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges[name] = {m for m in (_resolve(i, modules) for i in _imports(path))
                       if m is not None and m != name}
    return edges


def _layer_violations() -> list[str]:
    out = []
    for name, targets in _edges().items():
        path = _modules()[name].relative_to(PACKAGE).as_posix()
        layer = name.split(".")[0]
        allowed = MAY_IMPORT.get(layer)
        for target in sorted(targets):
            imported = target.split(".")[0]
            if allowed is not None and imported not in allowed and imported != layer:
                out.append(f"{path} imports gobblin_py.{target} ({layer} must not import {imported})")
            if layer == "config" and imported == "builtin" and path not in CONFIG_MAY_IMPORT_BUILTIN:
                out.append(f"{path} imports gobblin_py.{target} (config imports no plugin)")
            for importer, forbidden, why in SUB_RULES + connector_rules():
                if (name + ".").startswith(importer + ".") and (target + ".").startswith(forbidden + "."):
                    out.append(f"{path} imports gobblin_py.{target} ({importer} must not import {forbidden}: {why})")
    return sorted(set(out))


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan), each a list of its modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_every_layer_imports_only_what_is_below_it() -> None:
    found = _layer_violations()
    assert not found, "imports against the layering:\n" + "\n".join(found)


def test_no_import_cycle_in_the_package() -> None:
    """An import inside a function counts (it runs), and so does a package's __init__ (importing `gobblin_py.config`
    runs it); so does an import only a type checker reads: two modules that name each other's types are one piece of
    logic in two files, or want an interface (a Protocol) on the lower side."""
    cycles = _cycles(_edges())
    assert not cycles, "import cycles: " + "; ".join(" ↔ ".join(c) for c in cycles)


def test_the_checks_see_a_cycle_and_a_forbidden_edge() -> None:
    """The checks themselves: a made-up cycle is found, and the rules name a source importing a writer."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    importer, forbidden, _ = SUB_RULES[0]
    assert ("builtin.sources.kafka.source" + ".").startswith(importer + ".")
    assert ("builtin.writers.avro" + ".").startswith(forbidden + ".")
    rules = connector_rules()
    assert ("builtin.sources.postgres_cdc", "builtin.publishers.iceberg", "one connector never imports another") in rules
    assert ("builtin.publishers.fs", "builtin.publishers.delta", "a module the connectors share imports none of them") \
        in rules


def test_every_alias_and_every_moved_module_resolves() -> None:
    """Job files name plugins by alias; commit records written before the move name their old modules."""
    from gobblin_py.plugins import BUILTINS, MOVED, Kind, resolve

    for kind, aliases in BUILTINS.items():
        for alias, path in aliases.items():
            assert resolve(kind, alias) is resolve(kind, path), (kind, alias)
    publishers = {p.split(":")[0]: p.split(":")[1] for p in BUILTINS[Kind.PUBLISHER].values()}
    for old, new in MOVED.items():
        assert (PACKAGE.parent / (new.replace(".", "/") + ".py")).is_file(), new
        assert not (PACKAGE.parent / (old.replace(".", "/") + ".py")).exists(), f"{old} exists again: remove it from MOVED"
        if new in publishers:
            assert resolve(Kind.PUBLISHER, f"{old}:{publishers[new]}") is resolve(Kind.PUBLISHER, f"{new}:{publishers[new]}")
