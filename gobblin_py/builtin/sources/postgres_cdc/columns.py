"""Whether a captured table's existing rows may have changed without any change in the WAL since its last commit: no
change record would ever carry their new values, so every consumer (a change log replayed, an upsert table) would
keep the old ones while the run says committed.

PostgreSQL does that in three ways: `ADD COLUMN c … DEFAULT <constant>` gives every existing row the value at once
(the "fast default": pg_attribute.atthasmissing, nothing written to the rows); `ADD COLUMN` with a volatile default
(`random()`, `nextval`, a stored generated column) and `ALTER COLUMN … TYPE … [USING …]` rewrite the table (a new
relfilenode), and logical decoding leaves a rewrite out. So each table's commit records its shape (`state.shape`): its
relfilenode and, per column, the attribute number, name, type oid and typmod, atthasmissing, whether it has a default
and its pg_attribute row's xmin. The next run compares before reading: a new column with a missing value, or with a
default in a rewritten table; a column renamed; a column whose type changed, or whose row changed, in a rewritten
table: that table fails alone until it is snapshotted again. A column added without a default, a default set, a column
dropped, a type changed in place (varchar(10) → varchar(20): no rewrite), TRUNCATE, VACUUM FULL and CLUSTER change no
existing row's value and go on (a rewrite that only clears atthasmissing is VACUUM FULL's or CLUSTER's).
"""

from __future__ import annotations

from typing import Any

from gobblin_py.builtin.sources.postgres_cdc.split import CdcSplit
from gobblin_py.errors import SourceError

SHAPE_SQL = """
SELECT a.attrelid, a.attnum, a.attname, a.atttypid, a.atttypmod, format_type(a.atttypid, a.atttypmod), a.atthasmissing,
       a.atthasdef, a.xmin::text, pg_get_expr(d.adbin, d.adrelid), c.relfilenode
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid = ANY(%s::oid[]) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attrelid, a.attnum
"""


PRIMARY_KEYS_SQL = """
SELECT i.indrelid, a.attname FROM pg_index i CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, n)
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
WHERE i.indrelid = ANY(%s::oid[]) AND i.indisprimary ORDER BY i.indrelid, k.n
"""


def primary_keys(conn: Any, table_oids: list[int]) -> dict[int, list[str]]:
    """Each table's primary key columns in key order (empty: none), every table in one catalog query."""
    out: dict[int, list[str]] = {oid: [] for oid in table_oids}
    for oid, name in conn.execute(PRIMARY_KEYS_SQL, (list(table_oids),)).fetchall():
        out.setdefault(int(oid), []).append(name)
    return out


def checked_primary(conn: Any, split: CdcSplit) -> list[str]:
    """The table's primary key columns as the catalog holds them in `conn`'s snapshot, checked against the key planned
    (`split.primary`), which a chunked snapshot's ranges, its stream filter and the key-update rule rely on: a key
    changed since planning fails the task before it reads a row, naming the table, both keys and the fix."""
    now = primary_keys(conn, [split.oid])[split.oid]
    if split.primary is not None and now != split.primary:
        fix = (f"snapshot it again: `gobblin-py state reset JOB.yaml --dataset {split.table} --yes`, then run"
               if split.chunk is not None or split.chunks is not None else
               "run again (the next run plans by the new key); where a table is kept by key downstream, set "
               "publisher.key to the new key first")
        raise SourceError(f"table {split.table}: its primary key changed since this run planned it (planned "
                          f"({', '.join(split.primary) or 'none'}), now ({', '.join(now) or 'none'})), so ranges and "
                          f"key updates taken by the planned key would no longer match its rows. Nothing of this run "
                          f"is committed for it; {fix}")
    return now


def read_shapes(conn: Any, table_oids: list[int]) -> dict[int, dict[str, Any]]:
    """Each table's shape now, as a commit records it (`state.shape`): its relfilenode and its columns; every table
    of the publication in one catalog query."""
    rows: dict[int, list[Any]] = {oid: [] for oid in table_oids}
    for row in conn.execute(SHAPE_SQL, (list(table_oids),)).fetchall():
        rows.setdefault(int(row[0]), []).append(row[1:])
    return {oid: {"relfilenode": int(found[0][9]) if found else 0,
                  "columns": [{"attnum": int(num), "name": name, "type": int(oid_), "typmod": int(mod), "type_name": shown,
                               "missing": bool(missing), "default": bool(has_default), "xmin": str(xmin),
                               **({"default_expr": expr} if expr is not None else {})}
                              for num, name, oid_, mod, shown, missing, has_default, xmin, expr, _ in found]}
            for oid, found in rows.items()}


def silent_changes(kept: Any, now: dict[str, Any]) -> list[str]:
    """What changed since `kept` (a commit's `state.shape`) that may have changed existing rows without the WAL; empty
    when nothing did, or when the commit kept no shape (a state from before it was kept: checked from its next commit)."""
    if not isinstance(kept, dict) or not isinstance(kept.get("columns"), list):
        return []
    before = {c.get("attnum"): c for c in kept["columns"] if isinstance(c, dict)}
    rewritten = kept.get("relfilenode") != now["relfilenode"]
    how = f"the table was rewritten (relfilenode {kept.get('relfilenode')} → {now['relfilenode']})"
    found: list[str] = []
    for c in now["columns"]:
        old = before.get(c["attnum"])
        default = f"DEFAULT {c.get('default_expr', '…')}"
        if old is None:
            if c["missing"]:
                found.append(f"column {c['name']} was added with {default}: PostgreSQL gives every existing row that "
                             "value at once (a fast default), without a change in the WAL")
            elif c["default"] and rewritten:
                found.append(f"column {c['name']} was added with {default} and {how}: every existing row got a value "
                             "without a change in the WAL")
            continue
        if old.get("name") != c["name"]:
            found.append(f"column {old.get('name')} was renamed to {c['name']}: the existing rows' values under "
                         f"{c['name']} never came as changes")
        elif (old.get("type"), old.get("typmod")) != (c["type"], c["typmod"]):
            if rewritten:
                found.append(f"column {c['name']} changed type from {old.get('type_name')} to {c['type_name']} and "
                             f"{how}: ALTER COLUMN … TYPE … [USING …] rewrote every row's value without a change in "
                             "the WAL")
        elif old.get("xmin") != c["xmin"] and rewritten and not (old.get("missing") and not c["missing"]
                                                                 and old.get("default") == c["default"]):
            found.append(f"column {c['name']} was altered (its pg_attribute row's xmin {old.get('xmin')} → {c['xmin']}) "
                         f"and {how}: ALTER COLUMN … TYPE … USING … rewrites every row's value without a change in the "
                         "WAL (another ALTER COLUMN followed by TRUNCATE, VACUUM FULL or CLUSTER looks the same)")
    return found
