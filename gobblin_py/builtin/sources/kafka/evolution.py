"""Whether every value of one Avro schema reads into another whole, and the lossless merge of a subject's versions
(`schema_evolution: evolve`).

A writer schema reads *losslessly* into a reader schema when Avro's resolution succeeds for every value it can hold
and drops nothing: no writer field without a reader field of its name (or an alias), no type narrowed (only Avro's
promotions int→long→float→double and string↔bytes), no enum symbol the reader lacks, and every reader field the
writer lacks has a default. The merge of two versions is the narrowest schema both read into losslessly: a field
either lacks becomes nullable (default null), a narrowed type keeps the wider one, enums keep every symbol, union
branches are joined. Types that cannot be joined (a string and a record) are a `MergeError`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
PROMOTIONS = {"int": ("long", "float", "double"), "long": ("float", "double"), "float": ("double",),
              "string": ("bytes",), "bytes": ("string",)}
NAMED = ("record", "enum", "fixed")


class MergeError(ValueError):
    """Two versions hold a field whose types no one Avro type reads both of (its message names the field)."""


def _parse(schema: Any) -> Any:
    import fastavro

    return fastavro.parse_schema(schema, _write_hint=False)


def _names(schema: Any, found: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every named type a parsed schema defines, by full name."""
    found = {} if found is None else found
    if isinstance(schema, list):
        for branch in schema:
            _names(branch, found)
    elif isinstance(schema, dict):
        kind = schema.get("type")
        if kind in NAMED:
            found.setdefault(schema["name"], schema)
        for field in schema.get("fields", []) if kind == "record" else []:
            _names(field["type"], found)
        if kind == "array":
            _names(schema["items"], found)
        if kind == "map":
            _names(schema["values"], found)
        if isinstance(kind, (dict, list)):
            _names(kind, found)
    return found


class _Schema:
    """A parsed schema and its named types, so references resolve to their definitions."""

    def __init__(self, schema: Any) -> None:
        self.root = _parse(schema)
        self.names = _names(self.root)

    def resolve(self, t: Any) -> Any:
        """`t` with a named reference replaced by its definition, a `{"type": "int"}` by its type's name; a primitive
        with a logical type stays a dict (`kind_of` gives its underlying type; the merge keeps the logical type)."""
        while True:
            if isinstance(t, str) and t not in PRIMITIVES:
                t = self.names.get(t, t)
            elif isinstance(t, dict) and t.get("type") in PRIMITIVES and "logicalType" in t:
                return t
            elif isinstance(t, dict) and (t.get("type") in PRIMITIVES or isinstance(t.get("type"), (dict, list))
                                          or (isinstance(t.get("type"), str) and t["type"] not in (*NAMED, "array", "map"))):
                t = t["type"]
            else:
                return t


def kind_of(t: Any) -> str:
    if isinstance(t, list):
        return "union"
    if isinstance(t, dict):
        return str(t["type"])
    return str(t)


def describe_type(t: Any) -> str:
    if isinstance(t, list):
        return "[" + ", ".join(describe_type(b) for b in t) + "]"
    if isinstance(t, dict):
        if t.get("type") in NAMED:
            return f"{t['type']} {t['name']}"
        return f"{t['type']} ({t['logicalType']})" if "logicalType" in t else str(t["type"])
    return str(t)


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def losses(writer: Any, reader: Any) -> list[str]:
    """Why values of the schema `writer` do not all read into `reader` whole (empty: they do), each naming the field."""
    w, r = _Schema(writer), _Schema(reader)
    return _losses(w, r, w.root, r.root, "", set())


def _losses(ws: _Schema, rs: _Schema, w: Any, r: Any, path: str, seen: set[tuple[str, str]]) -> list[str]:
    w, r = ws.resolve(w), rs.resolve(r)
    where = path or "the value"
    wk, rk = kind_of(w), kind_of(r)
    if wk == "union":
        return [p for branch in w for p in _losses(ws, rs, branch, r, path, seen)]
    if rk == "union":
        tries = [_losses(ws, rs, w, branch, path, set(seen)) for branch in r]
        if any(not t for t in tries):
            return []
        same = [t for branch, t in zip(r, tries) if kind_of(rs.resolve(branch)) == wk]
        return same[0] if same else [f"{where}: {describe_type(w)} is none of {describe_type(r)}"]
    if wk != rk:
        if wk in PROMOTIONS and rk in PROMOTIONS[wk]:
            return []
        narrowed = rk in PROMOTIONS and wk in PROMOTIONS[rk]
        return [f"{where}: {wk} {'would be narrowed to' if narrowed else 'cannot be read as'} {rk}"]
    if wk == "record":
        key = (w["name"], r["name"])
        if key in seen:
            return []  # a recursive type: compared once
        seen.add(key)
        if _short(w["name"]) != _short(r["name"]) and _short(w["name"]) not in map(_short, r.get("aliases", [])):
            return [f"{where}: record {w['name']} cannot be read as record {r['name']}"]
        found = []
        matched = set()
        prefix = f"{path}." if path else ""
        for field in w["fields"]:
            match = _field(r, field["name"])
            name = f"{prefix}{field['name']}"
            if match is None:
                found.append(f"field {name} would be dropped")
                continue
            matched.add(match["name"])
            found.extend(_losses(ws, rs, field["type"], match["type"], name, seen))
        for field in r["fields"]:
            if field["name"] not in matched and "default" not in field and not any(
                    _field(w, a) is not None for a in field.get("aliases", [])):
                found.append(f"field {prefix}{field['name']} has no default for values without it")
        return found
    if wk == "enum":
        missing = [s for s in w["symbols"] if s not in r["symbols"]]
        return [f"{where}: enum symbol(s) {', '.join(missing)} would be lost"] if missing else []
    if wk == "fixed":
        return [] if w["size"] == r["size"] else [f"{where}: fixed({w['size']}) cannot be read as fixed({r['size']})"]
    if wk == "array":
        return _losses(ws, rs, w["items"], r["items"], f"{path}[]", seen)
    if wk == "map":
        return _losses(ws, rs, w["values"], r["values"], f"{path}{{}}", seen)
    return []


def _field(record: dict[str, Any], name: str) -> dict[str, Any] | None:
    for field in record["fields"]:
        if field["name"] == name or name in field.get("aliases", []):
            return field
    return None


def merge_versions(versions: list[tuple[str, Any]]) -> dict[str, Any]:
    """The narrowest record schema every one of `versions` ((label, schema), oldest first) reads into losslessly: the
    newest's fields in its order, then fields only earlier versions have (nullable, default null). MergeError naming
    the version, the ones merged before it and the field where their types cannot be joined."""
    label, out = versions[0]
    done = [label]
    for label, newer in versions[1:]:
        try:
            out = _Merge(out, newer).result
        except MergeError as exc:
            raise MergeError(f"{label} and the merge of {', '.join(done)}: {exc}") from None
        done.append(label)
    problems = [f"{label}: {p}" for label, v in versions for p in losses(v, out)]
    if problems:  # the merge is built to hold every version; a rule it misses must not pass silently
        raise MergeError("; ".join(problems))
    return out


def fingerprint(schema: Any) -> str:
    """128 bits of SHA-256 over the schema's JSON with sorted keys: names a merged output schema."""
    return hashlib.sha256(json.dumps(schema, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:32]


class _Merge:
    """One merge of an older (output) schema with a newer version; named types defined once, where first written."""

    def __init__(self, older: Any, newer: Any) -> None:
        self.old, self.new = _Schema(older), _Schema(newer)
        self.emitted: set[str] = set()
        self.result = self.merge(self.old.root, self.new.root, "")

    def merge(self, o: Any, n: Any, path: str) -> Any:
        o, n = self.old.resolve(o), self.new.resolve(n)
        ok, nk = kind_of(o), kind_of(n)
        if ok == "union" or nk == "union":
            return self.union(o if ok == "union" else [o], n if nk == "union" else [n], path)
        if ok in PRIMITIVES and nk in PRIMITIVES and _logical(o) != _logical(n):
            raise MergeError(f"{path or 'the value'}: {describe_type(o)} and {describe_type(n)} cannot be merged: their "
                             "numbers or bytes mean different things (a logical type added, removed or changed)")
        if ok != nk:
            if ok in PROMOTIONS and nk in PROMOTIONS[ok]:
                return nk
            if nk in PROMOTIONS and ok in PROMOTIONS[nk]:
                return ok  # the newer version narrowed it: keep the wider type, its values are promoted
            raise MergeError(f"{path or 'the value'}: {describe_type(o)} and {describe_type(n)} cannot be merged")
        if nk in PRIMITIVES:
            return self.clean(n) if isinstance(n, dict) else nk  # with its logical type
        if nk in NAMED and n["name"] in self.emitted:
            return n["name"]
        if nk == "record":
            self.emitted.add(n["name"])
            return self.record(o, n, path)
        if nk == "enum":
            self.emitted.add(n["name"])
            return {**self.clean(n), "symbols": [*n["symbols"], *(s for s in o["symbols"] if s not in n["symbols"])]}
        if nk == "fixed":
            if o["size"] != n["size"]:
                raise MergeError(f"{path or 'the value'}: fixed({o['size']}) and fixed({n['size']}) cannot be merged")
            self.emitted.add(n["name"])
            return self.clean(n)
        if nk == "array":
            return {**self.clean(n), "items": self.merge(o["items"], n["items"], f"{path}[]")}
        return {**self.clean(n), "values": self.merge(o["values"], n["values"], f"{path}{{}}")}

    def record(self, o: dict[str, Any], n: dict[str, Any], path: str) -> dict[str, Any]:
        fields, taken = [], set()
        prefix = f"{path}." if path else ""
        for field in n["fields"]:
            match = _field(o, field["name"])
            name = f"{prefix}{field['name']}"
            if match is None:
                typ = self.copy(field["type"], self.new)
                fields.append({**self.clean(field), "type": typ} if "default" in field else nullable(self.clean(field), typ))
                continue
            taken.add(match["name"])
            typ = self.merge(match["type"], field["type"], name)
            out = {**self.clean(field), "type": typ}
            if "default" in field:
                fields.append(with_default(out))
            elif "default" in match:  # the merge so far gave it one (earlier versions lack it): kept, or they lose it
                fields.append(nullable(out, typ) if match["default"] is None or isinstance(typ, list)
                              else {**out, "default": match["default"]})
            else:
                fields.append(out)
        for field in o["fields"]:
            if field["name"] not in taken:  # removed by the newer version: kept, null in its values
                fields.append(nullable(self.clean(field), self.copy(field["type"], self.old)))
        return {**self.clean(n), "fields": fields}

    def union(self, o: list[Any], n: list[Any], path: str) -> list[Any]:
        branches = [self.new.resolve(b) for b in n]
        plan: list[tuple[Any, Any]] = [(None, b) for b in branches]  # (older branch, newer branch)
        for ob in (self.old.resolve(b) for b in o):
            same = next((i for i, (_, b) in enumerate(plan) if _joins(ob, b)), None)
            if same is None:
                plan.append((ob, None))
            elif plan[same][0] is None:
                plan[same] = (ob, plan[same][1])
        out = []
        for ob, nb in plan:
            if ob is None:
                out.append(self.copy(nb, self.new))
            elif nb is None:
                out.append(self.copy(ob, self.old))
            else:
                out.append(self.merge(ob, nb, path))
        return _distinct(out)

    def copy(self, t: Any, side: _Schema) -> Any:
        """`t` of one side as it is, its named types defined where first written and referenced after."""
        t = side.resolve(t)
        k = kind_of(t)
        if k == "union":
            return [self.copy(b, side) for b in t]
        if k in PRIMITIVES:
            return self.clean(t) if isinstance(t, dict) else k  # with its logical type
        if k in NAMED:
            if t["name"] in self.emitted:
                return t["name"]
            self.emitted.add(t["name"])
        if k == "record":
            return {**self.clean(t), "fields": [{**self.clean(f), "type": self.copy(f["type"], side)} for f in t["fields"]]}
        if k == "array":
            return {**self.clean(t), "items": self.copy(t["items"], side)}
        if k == "map":
            return {**self.clean(t), "values": self.copy(t["values"], side)}
        return self.clean(t)

    @staticmethod
    def clean(d: dict[str, Any]) -> dict[str, Any]:
        """A parsed schema's dict without fastavro's own keys."""
        return {k: v for k, v in d.items() if not k.startswith("__")}


def _logical(t: Any) -> tuple[Any, ...] | None:
    """A primitive's logical type and its parameters (None for a plain primitive): what its values mean."""
    if not isinstance(t, dict) or "logicalType" not in t:
        return None
    return (t["logicalType"], t.get("precision"), t.get("scale"))


def _joins(a: Any, b: Any) -> bool:
    """Whether two union branches are one type to merge (same kind and, for named types, the same short name; a
    number or string type joins its promotions)."""
    ak, bk = kind_of(a), kind_of(b)
    if ak in NAMED or bk in NAMED:
        return ak == bk and _short(a["name"]) == _short(b["name"])
    if ak == bk:
        return True
    numbers = ("int", "long", "float", "double")
    return (ak in numbers and bk in numbers) or {ak, bk} == {"string", "bytes"}


def _distinct(branches: list[Any]) -> list[Any]:
    out: list[Any] = []
    for b in branches:
        if b not in out:
            out.append(b)
    return out


def nullable(field: dict[str, Any], typ: Any) -> dict[str, Any]:
    """`field` of type `typ` made nullable, null first and its default: values without it read as null."""
    branches = typ if isinstance(typ, list) else [typ]
    return {**field, "type": ["null", *(b for b in branches if b != "null")], "default": None}


def with_default(field: dict[str, Any]) -> dict[str, Any]:
    """A union field whose default is null has null as its first branch (Avro's rule for a union's default)."""
    typ = field["type"]
    if field.get("default") is None and isinstance(typ, list) and "null" in typ:
        return {**field, "type": ["null", *(b for b in typ if b != "null")]}
    return field
