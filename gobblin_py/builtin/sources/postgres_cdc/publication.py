"""What the publication decides, and how a run knows it did not change: pgoutput decodes a change only if, as of the
change's WAL position (a historic catalog snapshot), its table was in the publication, its operation published and its
row passed the table's row filter; a window lost there is lost for good, whatever the publication is later.

So a publication must publish insert, update, delete and truncate, with no row filter and no column list on a table
(refused before anything runs). And each table's commit records the publication's identity: its oid, the xmin of its
pg_publication row (every ALTER PUBLICATION … SET (…), RENAME or OWNER TO writes a new one; ADD/DROP TABLE do not)
and the table's membership rows (the pg_publication_rel row of the table or of a partition ancestor, the
pg_publication_namespace row of its schema, or FOR ALL TABLES: a table dropped and added back gets a new row, a new
oid). When none of the recorded membership rows is left, the table was out of the publication in between; when the
xmin differs, what it published in between is unknown. Either fails that table closed until it is snapshotted again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gobblin_py.errors import ConfigError

OPERATIONS = ("insert", "update", "delete", "truncate")
"""What a publication must publish: a change of an operation left out is never in the change log."""

FULL_PUBLISH = ", ".join(OPERATIONS)

SELF_AND_ANCESTORS = "SELECT %s::oid UNION SELECT relid FROM pg_partition_ancestors(%s)"
"""A table and, for a partition, the tables it is a partition of (pg_partition_ancestors gives none for a plain table)."""

INHERITS_XMINS = (f"SELECT xmin::text FROM pg_inherits WHERE inhrelid IN ({SELF_AND_ANCESTORS}) ORDER BY inhrelid, "
                  "inhparent")
"""The xmins of a partition's links to its ancestors: a partition detached and attached again has a new link, so its
membership through an ancestor's row is new too (it was out of the publication in between)."""


@dataclass(frozen=True)
class Publication:
    """The publication's row as of one moment, and each planned table's membership rows (by relation oid)."""

    name: str
    oid: int
    xmin: str  # the pg_publication row's xmin: a new one with each ALTER PUBLICATION that rewrites the row
    publishes: dict[str, bool]
    via_root: bool
    all_tables: bool
    members: dict[int, list[str]] = field(default_factory=dict)  # table oid → "table:<oid>[@<links>]", "schema:…", "all:…"
    narrowed: dict[int, list[str]] = field(default_factory=dict)  # table oid → "row filter", "column list"

    def identity(self, table_oid: int) -> dict[str, Any]:
        """What a table's commit records (`state.publication`)."""
        return {"name": self.name, "oid": self.oid, "xmin": self.xmin,
                "publish": ", ".join(op for op in OPERATIONS if self.publishes.get(op)), "via_root": self.via_root,
                "membership": sorted(self.members.get(table_oid, []))}


def read_publication(conn: Any, name: str, table_oids: list[int]) -> Publication | None:
    """The publication `name` now, with the membership rows of each table in `table_oids`; None: it does not exist."""
    row = conn.execute("SELECT oid, xmin::text, pubinsert, pubupdate, pubdelete, pubtruncate, pubviaroot, puballtables "
                       "FROM pg_publication WHERE pubname = %s", (name,)).fetchone()
    if row is None:
        return None
    oid, xmin, ins, upd, dele, trunc, via_root, all_tables = row
    pub = Publication(name, int(oid), str(xmin), dict(zip(OPERATIONS, (ins, upd, dele, trunc))), bool(via_root),
                      bool(all_tables))
    modern = int(conn.execute("SHOW server_version_num").fetchone()[0]) >= 150000  # row filters, column lists, schemas
    filters = ", r.prqual IS NOT NULL, r.prattrs IS NOT NULL" if modern else ", false, false"
    for table in table_oids:
        members, narrowed = [f"all:{pub.oid}"] if all_tables else [], []
        links = ",".join(x for (x,) in conn.execute(INHERITS_XMINS, (table, table)))
        for rel, ancestor, has_filter, has_columns in conn.execute(
                f"SELECT r.oid, r.prrelid <> %s{filters} FROM pg_publication_rel r WHERE r.prpubid = %s "
                f"AND r.prrelid IN ({SELF_AND_ANCESTORS})", (table, pub.oid, table, table)):
            members.append(f"table:{int(rel)}" + (f"@{links}" if ancestor else ""))
            narrowed += ["row filter"] * bool(has_filter) + ["column list"] * bool(has_columns)
        if modern:
            members += [f"schema:{int(n)}" for (n,) in conn.execute(
                "SELECT n.oid FROM pg_publication_namespace n WHERE n.pnpubid = %s AND n.pnnspid IN (SELECT c.relnamespace "
                f"FROM pg_class c WHERE c.oid IN ({SELF_AND_ANCESTORS}))", (pub.oid, table, table))]
        pub.members[table] = members
        pub.narrowed[table] = sorted(set(narrowed))
    return pub


def check_publishes_everything(pub: Publication, endpoint: str, names: dict[int, str]) -> None:
    """A publication that leaves out an operation, or a table's rows or columns, is refused before anything runs: what
    it leaves out is never decoded (a deleted row would stay in every consumer)."""
    missing = [op for op in OPERATIONS if not pub.publishes.get(op)]
    if missing:
        raise ConfigError(f"{endpoint}: publication {pub.name!r} does not publish {', '.join(missing)}: those changes "
                          f"would never reach the output (a deleted row would stay in every consumer). Publish every "
                          f"operation: ALTER PUBLICATION {pub.name} SET (publish = '{FULL_PUBLISH}'); then, for a "
                          "table already committed, the changes made meanwhile are not in the change log: snapshot it "
                          "again with `gobblin-py state reset JOB.yaml --dataset schema.table --yes` (the next run "
                          "names each table)")
    for oid, kinds in pub.narrowed.items():
        if kinds:
            table = names[oid]
            raise ConfigError(f"{endpoint}: publication {pub.name!r} has a {' and a '.join(kinds)} on table {table}: "
                              "the rows or columns it leaves out would never reach the output. Publish the whole "
                              f"table: ALTER PUBLICATION {pub.name} DROP TABLE {table}; ALTER PUBLICATION {pub.name} "
                              f"ADD TABLE {table}; then, if it was committed before, snapshot it again (the changes "
                              f"left out meanwhile are not in the change log): `gobblin-py state reset JOB.yaml "
                              f"--dataset {table} --yes`")


def membership_problem(dataset: str, kept: Any, now: dict[str, Any], slot: str) -> str | None:
    """Why a table's committed position no longer covers every change of it (its recorded publication identity
    against `now`), or None; a state from before the identity was kept is not checked."""
    if not isinstance(kept, dict):
        return None
    before, after = set(kept.get("membership") or []), set(now["membership"])
    remedy = (f"Snapshot it again: `gobblin-py state reset JOB.yaml --dataset {dataset} --yes`, then run (an upsert "
              "table: its rows are replaced by the snapshot)")
    anew = (f"Nothing of it was read. Drop the slot (SELECT pg_drop_replication_slot('{slot}')) and snapshot every "
            "table of the job again: `gobblin-py state reset JOB.yaml --dataset schema.table --yes` for each, then run "
            "(the slot is created again)")
    if kept.get("name") != now["name"]:
        return (f"table {dataset} was committed from publication {kept.get('name')!r}, and the job now reads "
                f"{now['name']!r}: the changes made while it was not in {now['name']!r} are not in the change log, and "
                f"PostgreSQL 16 cannot decode the slot by {now['name']!r} from before that publication existed. {anew}")
    if kept.get("oid") != now["oid"]:
        return (f"publication {now['name']!r} was dropped and created again since table {dataset}'s last commit (oid "
                f"{kept.get('oid')}, now {now['oid']}): its changes while the publication was missing are not in the "
                "change log, and PostgreSQL 16 cannot decode the slot past that window at all ('publication does not "
                f"exist'). {anew}")
    if before and not before & after:
        return (f"table {dataset} left publication {now['name']!r} and was added back since its last commit (its "
                f"membership {', '.join(sorted(before))} is now {', '.join(sorted(after)) or 'none'}): its changes in "
                "between are left out of the change log for good (pgoutput decodes by the publication as of each "
                f"change). Nothing of it was read. {remedy}")
    if kept.get("xmin") != now["xmin"]:
        return (f"publication {now['name']!r} was altered since table {dataset}'s last commit (its pg_publication row's "
                f"xmin was {kept.get('xmin')}, is now {now['xmin']}: ALTER PUBLICATION … SET (publish …), SET "
                "(publish_via_partition_root …), RENAME or OWNER TO): what it "
                "published in between is not known (a delete made while it published fewer operations is never in the "
                f"change log). Nothing of the table was read. {remedy}")
    return None
