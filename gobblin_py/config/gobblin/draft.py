"""The job document being written from a resolved Gobblin job: settings read through one place, each key's origin kept.

What every section's translation (job, source, converters, writer and publisher) writes through and reads from."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gobblin_py.config.gobblin.mapping import CLASSES, RULES, Parse, Role, canonical_class
from gobblin_py.config.gobblin.resolve import REQUIRED_KEY, TEMPLATE_KEY, Resolved


@dataclass
class Translation:
    """The job document, where each of its keys came from, and what the user should hear about."""

    document: dict[str, Any]
    origins: dict[str, str]                 # gobblin-py key path → "gobblin.key (file:line)"
    warnings: list[str] = field(default_factory=list)
    unused: list[str] = field(default_factory=list)   # warnings, errors under --strict
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)    # how a mapped class behaves differently, once per class
    schemas: list[tuple[dict[str, Any], dict[str, Any], str]] = field(default_factory=list)  # (converter, schema, name)

class Props:
    """The resolved settings, read through one place that records which keys were used."""

    def __init__(self, resolved: Resolved, out: Translation) -> None:
        self.settings = resolved.settings
        self.used: set[str] = {TEMPLATE_KEY, REQUIRED_KEY}
        self.out = out

    def where(self, key: str) -> str:
        setting = self.settings.get(key)
        return f"{key} ({setting.origin})" if setting else key

    def get(self, key: str, strip: bool = True) -> str | None:
        setting = self.settings.get(key)
        if setting is None:
            return None
        self.used.add(key)
        if setting.problem:
            self.problem(key, setting.problem)
            return None
        return setting.value.strip() if strip else setting.value

    @staticmethod
    def branch_key(key: str, branch: int | None) -> str:
        """`key.N` for branch N of a forked job, `key` otherwise: Gobblin's ForkOperatorUtils reads no other."""
        return key if branch is None else f"{key}.{branch}"

    def problem(self, key: str, message: str) -> None:
        self.out.problems.append(f"{self.where(key)}: {message}")

    def warn(self, key: str, message: str) -> None:
        self.out.warnings.append(f"{self.where(key)}: {message}")

    def integer(self, key: str) -> int | None:
        value = self.get(key)
        if value is None:
            return None
        try:
            return int(value)
        except ValueError:
            self.problem(key, f"expected a whole number, got {value!r}")
            return None

    def boolean(self, key: str) -> bool | None:
        """Java's Boolean.parseBoolean: `true` in any case is true, anything else false."""
        value = self.get(key)
        return None if value is None else value.lower() == "true"

    def listed(self, key: str) -> list[str]:
        value = self.get(key)
        return [v.strip() for v in value.split(",") if v.strip()] if value else []


class Draft:
    """The document being written, the settings it is written from, and what the sections decided so far (the
    parsing converter, the fork's branch count, where the converters' schema is read)."""

    def __init__(self, props: Props, out: Translation, file_stem: str = "") -> None:
        self.file_stem = file_stem
        self.p = props
        self.out = out
        self.doc = out.document
        self.parse: Parse | None = None
        self.branches = 1
        self.schema_key = "source.schema"  # where the schema the converters see is written (StringSchemaInjector: its key)

    def set(self, path: str, value: Any, key: str) -> None:
        """Set `a.b.c` in the document and remember the Gobblin key it came from."""
        node = self.doc
        *parents, last = path.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
        self.out.origins[path] = self.p.where(key)

    def copy(self, key: str, *, required: str = "", convert: Callable[[str], Any] = str) -> None:
        """Set the gobblin-py key the mapping table names for `key` from its value; a missing required key is a problem."""
        value = self.p.get(key)
        if value is not None:
            self.set(RULES[key].target, convert(value), key)
        elif required and key not in self.p.settings:
            self.out.problems.append(f"{key}: required: {required}")

    def gobblin_class(self, key: str, role: Role, default: str | None = None) -> tuple[str, Any] | None:
        """The mapping of the class a key names, or a problem naming the key; None when unset without default."""
        raw = self.p.get(key) or default
        if raw is None:
            return None
        name = canonical_class(raw)
        mapped = CLASSES.get(name)
        if mapped is None:
            self.p.problem(key, f"unsupported Gobblin {role.value} class {raw!r}: gobblin-py has no equivalent "
                                "(see `gobblin-py convert --help` for the classes it maps)")
            return None
        if mapped.role is not role:
            self.p.problem(key, f"{raw!r} is a Gobblin {mapped.role.value}, not a {role.value}")
            return None
        if mapped.becomes is None and mapped.parses is None:
            self.p.problem(key, f"unsupported Gobblin {role.value} class {raw!r}: {mapped.note}")
            return None
        self.note(mapped)
        return raw, mapped

    def note(self, mapped: Any) -> None:
        """Say once how a mapped class behaves differently from Gobblin's."""
        line = f"{mapped.name.rsplit('.', 1)[-1]} → {mapped.becomes or 'parsed by the source'}: {mapped.note}"
        if mapped.note and line not in self.out.notes:
            self.out.notes.append(line)

    def on_fs(self, path: str, *uri_keys: str) -> str:
        """`path` on the filesystem the first set URI key (or fs.uri) names; local paths stay paths."""
        uris = [self.p.get(k) for k in (*uri_keys, "fs.uri")]  # each read, so none is reported unused
        uri = next((u for u in uris if u), None)
        if not uri or uri.startswith("file:") or "://" in path:
            return path
        return f"{uri.rstrip('/')}/{path.lstrip('/')}"
