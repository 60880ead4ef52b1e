"""The table's identity, checked around every commit: it is still the table (uuid, creating commit) the dataset's
commits went to, no other driver of the job commits to it, a lost catalog is not mistaken for a new table, and one
table holds one dataset. Each mismatch fails closed, naming what changed and what to do."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from gobblin_py.api import DatasetCommit
from gobblin_py.builtin.publishers.iceberg.catalog import load_table, table_uri
from gobblin_py.builtin.publishers.iceberg.snapshots import (
    COMMIT_ID,
    CREATED_BY,
    WATERMARKS,
    creating_commit,
    latest_marks,
    other_dataset,
    read_metadata,
)
from gobblin_py.errors import CommitError
from gobblin_py.fs import Location, filesystem_for

log = logging.getLogger(__name__)


def pin(catalog: Any, name: str, table_dir: Location, commit: DatasetCommit, last: dict[str, Any]) -> dict[str, Any]:
    """The table's uuid (or, before the table exists, this commit id, which the creating transaction sets as a
    property), after checking that the table is the one the dataset's last commit went to: a table dropped, or
    dropped and created again, since would leave the rows committed before out of what readers see while the
    watermarks are past them, so it is refused, naming what changed. `name` is the dataset's table, at `table_dir`
    when this publisher creates it."""
    table = load_table(catalog, name)
    uuid, created = last.get("table_uuid"), last.get("created_by")
    fix = (f"Nothing of dataset {commit.dataset} was published and its watermarks did not move. If the table as it "
           f"is now is meant, start the dataset over or set its watermarks to what the table holds: `gobblin-py state "
           f"reset JOB.yaml --dataset {commit.dataset} [--to KEY=VALUE …]` (which forgets the pinned table); else put "
           "the old table back")
    if table is None:
        if uuid is not None or created is not None:
            check_no_table_there(catalog, commit.dataset, name, table_dir, pinned=last)  # a lost catalog: register it
            which = f"Iceberg table uuid {uuid}" if uuid is not None else f"created by commit {created}"
            raise CommitError(f"table {name} ({which}, which this job's last commit of dataset {commit.dataset} went to) "
                              f"is gone: dropped or renamed by another writer, or publisher.table now names another table. {fix}")
        return {"created_by": commit.commit_id, "commit_id": commit.commit_id}
    now = str(table.metadata.table_uuid)
    ours = created is None or table.properties.get(CREATED_BY) == created or any(  # made by our commit, or by
        s.summary is not None and s.summary.get(COMMIT_ID) == created for s in table.snapshots())  # another dataset's
    if (uuid is not None and now != uuid) or (uuid is None and not ours):
        was = f"uuid {uuid}" if uuid is not None else f"the table commit {created} created"
        raise CommitError(f"table {name} is Iceberg table uuid {now}, not {was}, which this job's last commit of "
                          f"dataset {commit.dataset} went to: it was dropped and created again. {fix}")
    newest = newest_commit(table, name, commit)
    mine = last.get("commit_id")
    if mine is not None and newest is not None and newest != mine:
        raise CommitError(another_driver(name, commit, newest, f"this work directory's last commit of it is {mine}",
                                         pending=False))
    return {"table_uuid": now, "commit_id": commit.commit_id, "follows": newest}


def still_pinned(table: Any, name: str, commit: DatasetCommit) -> None:
    """At the table commit (a replay after a crash too): the table is still the one `pin` found when the sequence
    was built; a table dropped or re-created in between fails the step, the sequence pending, never a new table
    holding only this commit's rows."""
    pinned = commit.pinned.get("table_uuid")
    if pinned is None:
        return
    now = str(table.metadata.table_uuid) if table is not None else None
    if now == pinned and "follows" in commit.pinned:
        newest = newest_commit(table, name, commit)
        if newest is not None and newest not in (commit.pinned["follows"], commit.commit_id):
            raise CommitError(another_driver(name, commit, newest,
                                             f"when this commit was built it was {commit.pinned['follows']}", pending=True))
    if now != pinned:
        raise CommitError(f"table {name} is {'gone' if now is None else f'Iceberg table uuid {now}'}, not Iceberg table "
                          f"uuid {pinned}, which commit {commit.commit_id} was built for: dropped or created again since. "
                          f"Nothing was appended. Put the old table back and run again, or give the commit up with "
                          f"`gobblin-py recover JOB.yaml --dataset {commit.dataset} --abandon`, then `state reset` the dataset")


def newest_commit(table: Any, name: str, commit: DatasetCommit) -> str | None:
    """The commit id of the job's newest snapshot of the dataset in the table (None: none, or all expired)."""
    mark = latest_marks(table, name, commit.job).get(commit.dataset)
    return mark.commit_id if mark is not None else None


def another_driver(name: str, commit: DatasetCommit, newest: str, expected: str, pending: bool) -> str:
    """Why a commit is refused when the job's newest commit of its dataset in the table is another work directory's."""
    give_up = (f"give this commit up (`gobblin-py recover JOB.yaml --dataset {commit.dataset} --abandon`), then "
               if pending else "")
    return (f"table {name}: the newest commit of dataset {commit.dataset} by job {commit.job} is {newest}, and "
            f"{expected}: another driver of this job (another host or work directory, the same job name) commits to "
            f"the table, and each would add again what the other committed. Nothing of commit {commit.commit_id} was "
            f"appended and its watermarks did not move. Run the job from one work directory: {give_up}set the dataset's "
            f"watermarks to what the table holds (the `{WATERMARKS}` summaries of the job's snapshots carry them): "
            f"`gobblin-py state reset JOB.yaml --dataset {commit.dataset} --to KEY=VALUE … --yes`")


def check_no_table_there(catalog: Any, dataset: str, name: str, table_dir: Location, job: str | None = None,
                         pinned: Mapping[str, Any] | None = None) -> None:
    """The catalog has no table `name`, yet its location `table_dir` holds a table's metadata: the catalog was lost or
    replaced (a new SQLite file) or the table dropped without purge. Creating it anew there would leave every row committed
    before out of what readers see, so it is refused, naming the metadata to register (the `pinned` table's newest,
    where the dataset's last commit pinned one).

    With `job`, metadata that only `job`'s own creating transactions wrote (each file the first version of a table
    its property names a commit of `job` as creating, with no snapshot but that commit's) is let through: a run
    killed inside the commit creating the table, after its metadata file and before the catalog row, and that
    commit abandoned. No reader ever saw that table; `pin` still refuses it where the dataset's last commit went to
    a table (a lost catalog then)."""
    from pyiceberg.io import load_file_io

    metadata = table_dir / "metadata"
    fs = filesystem_for(metadata)
    found = sorted(str(p) for p in fs.listdir(metadata) if str(p).endswith(".metadata.json")) if fs.exists(metadata) else []
    if not found:
        return
    io = load_file_io(catalog.properties, table_uri(found[0]))
    read = {p: read_metadata(io, table_uri(p)) for p in found}
    creators = {creating_commit(m) if m is not None else None for m in read.values()}
    if job is not None and None not in creators and all(str(c).startswith(f"{job}/") for c in creators):
        log.warning("table %s is not in the catalog, and its location holds only metadata the commit(s) %s of this "
                    "job wrote while creating it, which never reached the catalog (a run killed inside the "
                    "creating commit, which was then abandoned): no reader saw that table. This commit creates "
                    "the table anew; those %d file(s) under %s are left, unused", name, ", ".join(sorted(map(str, creators))),
                    len(found), metadata)
        return
    pinned = pinned or {}

    def newest(p: str) -> tuple[bool, int, str]:  # the pinned table's first, then the latest written
        m = read[p]
        if m is None:
            return False, -1, p
        ours = str(m.table_uuid) == pinned.get("table_uuid") or m.properties.get(CREATED_BY) == pinned.get("created_by")
        return ours, m.last_updated_ms, p

    latest = max(found, key=newest)
    raise CommitError(f"table {name} is not in the catalog, but its location holds a table's metadata ({latest}, "
                      f"{len(found)} version(s)): the catalog was lost or replaced, or the table dropped without "
                      "purging it. Nothing of dataset " + dataset + " was published and its watermarks did not move. "
                      "Register the table again (pyiceberg: catalog.register_table("
                      f"{name!r}, {latest!r})) and run again, or, to start the table over, move {table_dir} "
                      "away (and `gobblin-py state reset JOB.yaml --dataset " + dataset + "` to load it from the input's start)")


def check_one_dataset(table: Any, dataset: str, name: str, table_setting: str) -> None:
    """Under `{dataset}` (in `table_setting`, publisher.table) a table holds one dataset: two datasets whose names map
    to one table (`public.a_b` and `public_a.b` both to `db.public_a_b`) are refused naming both, never mixed in one table."""
    if table is None or "{dataset}" not in table_setting:
        return
    other = other_dataset(table, dataset)
    if other is not None:
        raise CommitError(f"table {name} holds dataset {other!r}, and publisher.table {table_setting!r} names it "
                          f"for dataset {dataset!r} too (a '.' in a dataset's name becomes '_' in a catalog with "
                          "one-level namespaces): nothing of it goes into the table, and its watermarks do not move. "
                          "Capture the two in jobs of their own with other publisher.table names (a commit already "
                          f"pending: `gobblin-py recover JOB.yaml --dataset {dataset} --abandon`)")
