"""The upsert world of the model-based test (see world.py): a keyed Kafka topic on a local Tansu broker kept as an
Iceberg table by key (`mode: upsert, key: [_kafka_key], order_by: [_kafka_offset]`, `tombstones: delete`), the
table read back by a pyiceberg scan and, since upsert mode is copy-on-write (no delete files, which the oracle
checks), by DuckDB over the data files the current snapshot lists: both must read the same rows.

The input: 20 keys, each always on one partition (as Kafka's partitioner keeps them), each message a unique value or
a tombstone; a batch updates a few hot keys many times, deletes keys and deletes then re-inserts one. The model keeps
each partition's messages in offset order. The oracle is by key, not by id: after every step no key is in the table
twice, every row is a message of its key (value and offset) and never a tombstone's, and each partition's keys read
as they stood after one and the same offset N of it, N never smaller than the last step's (the table never goes back
in time, and no change is lost in between) — except after a `state reset --to P=K`, which re-applies P's changes from
K: until the next run that reads to the end, each key of P may read any state it had at or after K (a `run
--continuous` re-applies the range checkpoint by checkpoint). After the final runs the table is exactly each key's last
value, without the keys whose last message is a tombstone.

The rules are those of every world (world.py), the upsert table commit's own crash point among the commit points,
and `run --continuous` killed after a few checkpoints (world_kafka.py), with these meanings here: `recover --abandon`
(after new changes and a run killed at a commit point, so that there is a commit to abandon) either refuses (the
table commit ran: it cannot be undone, and the message says so) or drops a commit whose table commit never ran, and
the next run re-reads its range; either way the table reads as it did after the kill. `compact` (with and
without `--dedup-key _kafka_key`) leaves an upsert table alone, saying why, and exits 0: the table reads as before
too. (It failed, exit 1 naming a file, until the model found it: the upsert table's files are written by pyiceberg,
without the Avro schema in their footer that the Parquet merge rewrites them with.)

`DeltaUpsertHistory` is the same world into a Delta table in upsert mode (`scripts/soak_world.py --world upsert_delta`).

Left out: the topic deleted and created again (its offsets start over, so `order_by: [_kafka_offset]` no longer tells
the last change of a key across the two incarnations; docs/publishers/iceberg.md assumes one)."""

from __future__ import annotations

import io
import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gobblin_py.builtin.publishers.iceberg.upsert import WRITTEN_POINT
from support.kafka_broker import create_topic, produce
from support.world import CRASH_POINTS, History, Rule, Violation, World
from support.world_kafka import PARTITIONS, KafkaHistory, KafkaWorld

KEYS = tuple(f"k{i:02d}" for i in range(20))
VALUE_SCHEMA = {"type": "record", "name": "Value", "fields": [{"name": "v", "type": "string"}]}
TABLE = "db.kv"
COLUMNS = ("_kafka_key", "_kafka_offset", "v", "_kafka_deleted")
"""What the oracle reads of the table."""

Message = tuple[str, str | None]  # (key, value); None is a tombstone


def partition_of(key: str) -> int:
    return int(key[1:]) % PARTITIONS


@dataclass
class UpsertWorld(KafkaWorld):
    """A keyed topic: each partition's messages by offset, and how far back in it the table may read."""

    messages: dict[int, list[Message]] = field(default_factory=lambda: {p: [] for p in range(PARTITIONS)})
    lo: dict[int, int] = field(default_factory=lambda: dict.fromkeys(range(PARTITIONS), 0))  # the table's least offset
    reset: dict[int, int] = field(default_factory=dict)  # partition → offset a `state reset` re-applies it from


def encoded(parsed: Any, value: str | None) -> bytes | None:
    """A message's value: `{"v": value}` as schemaless Avro of the parsed VALUE_SCHEMA; None (a tombstone) for None."""
    if value is None:
        return None
    import fastavro

    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, parsed, {"v": value})
    return buf.getvalue()


def state_at(messages: list[Message], n: int) -> dict[str, str | None]:
    """key → its value after the first `n` messages of a partition (None: never written, or deleted)."""
    state: dict[str, str | None] = {}
    for key, value in messages[:n]:
        state[key] = value
    return state


class UpsertHistory(KafkaHistory):
    """A history of a keyed Kafka topic → Iceberg upsert job (see the module's docstring)."""

    kind = "upsert"
    crash_points = (*CRASH_POINTS, WRITTEN_POINT)

    def new_world(self, root: Path) -> World:
        root.mkdir(parents=True, exist_ok=True)
        world = UpsertWorld(root, bootstrap=self.bootstrap, topic=f"u{self.seed}-{uuid.uuid4().hex[:8]}")
        create_topic(world.bootstrap, world.topic, PARTITIONS)
        return world

    def job(self, world: World) -> dict[str, Any]:
        job = super().job(world)
        schema = world.root / "value.avsc"
        schema.write_text(json.dumps(VALUE_SCHEMA))
        job["source"] |= {"deserializer": "avro", "avro_schema": str(schema), "metadata_columns": ["key", "offset"],
                          "tombstones": "delete"}
        for section in ("converters", "quality"):
            del job[section]
        job["writer"] = {"class": "parquet"}
        job["publisher"] = {"class": "iceberg", "table": TABLE, "warehouse": str(world.root / "warehouse"),
                            "mode": "upsert", "key": ["_kafka_key"], "order_by": ["_kafka_offset"],
                            "delete_when": {"column": "_kafka_deleted", "equals": [True]}}
        return job

    def rules(self) -> list[tuple[int, Rule]]:
        """Every world's rules, changes produced twice as often (a run without any applies nothing), and a continuous
        run killed."""
        return [(8 if rule == self.produce else w, rule) for w, rule in History.rules(self)] + [(1, self.continuous_killed)]

    # --- the oracle -------------------------------------------------------------------------------------------

    def table_rows(self, world: World, step: int, rule: str) -> list[dict[str, Any]]:
        """The table's rows as pyiceberg reads them (none before the job made it), checked against DuckDB's read of
        the data files its current snapshot lists, which must carry no delete file."""
        from pyiceberg.catalog import load_catalog
        from pyiceberg.exceptions import NoSuchTableError

        db = world.root / "work" / "iceberg" / "catalog.db"
        if not db.exists():
            return []
        try:
            table = load_catalog("gobblin_py", type="sql", uri=f"sqlite:///{db}").load_table(TABLE)
        except NoSuchTableError:
            return []
        rows = table.scan(selected_fields=COLUMNS).to_arrow().to_pylist()
        tasks = list(table.scan().plan_files())
        deletes = [d.file_path for t in tasks for d in t.delete_files]
        if deletes:
            raise Violation(self.seed, step, rule, f"table {TABLE} has delete files (upsert is copy-on-write): {deletes[:3]}")
        return self.as_duckdb_reads(rows, [t.file.file_path.removeprefix("file://") for t in tasks], "pyiceberg", step, rule)

    def as_duckdb_reads(self, rows: list[dict[str, Any]], paths: list[str], reader: str, step: int,
                        rule: str) -> list[dict[str, Any]]:
        """`rows` (of COLUMNS, as `reader` read them), once DuckDB reads the same from the data files `paths`."""
        import duckdb

        seen = duckdb.connect().execute(f"SELECT {', '.join(COLUMNS)} FROM read_parquet(?, union_by_name = true)",
                                        [paths]).fetchall() if paths else []
        if sorted(seen) != sorted(tuple(r[c] for c in COLUMNS) for r in rows):
            raise Violation(self.seed, step, rule, f"DuckDB over the listed files reads other rows than {reader}: "
                                                   f"{sorted(seen)[:5]} vs {sorted(tuple(r.values()) for r in rows)[:5]}")
        return rows

    def check(self, world: World, step: int, rule: str, final: bool) -> None:
        """No key twice, every row a message of its key; each partition's keys as they stood after one offset, never
        an earlier one (after a `state reset`, any state each key had from the reset on); at the end, the last."""
        assert isinstance(world, UpsertWorld)
        rows = self.table_rows(world, step, rule)
        table: dict[str, str | None] = {}
        for r in rows:
            key, offset, value = r["_kafka_key"], r["_kafka_offset"], r["v"]
            if key in table:
                raise Violation(self.seed, step, rule, f"key {key!r} twice in the table: {table[key]!r} and {value!r}")
            messages = world.messages[partition_of(key)] if key in KEYS else []
            if not (0 <= offset < len(messages) and messages[offset] == (key, value)) or r["_kafka_deleted"]:
                raise Violation(self.seed, step, rule, f"row {r} is no message of its key")
            table[key] = value
        if final:
            want = {k: v for p in range(PARTITIONS) for k, v in state_at(world.messages[p], len(world.messages[p])).items()
                    if v is not None}
            if table != want:
                wrong = sorted(k for k in set(table) | set(want) if table.get(k) != want.get(k))
                raise Violation(self.seed, step, rule, f"{len(wrong)} key(s) not at their last value, e.g. "
                                + ", ".join(f"{k}: {table.get(k)!r} (want {want.get(k)!r})" for k in wrong[:5]))
            return
        for p in range(PARTITIONS):
            self.check_partition(world, p, table, step, rule)

    def check_partition(self, world: UpsertWorld, p: int, table: dict[str, str | None], step: int, rule: str) -> None:
        """Partition `p`'s keys read as after offset N ≥ world.lo[p], and world.lo[p] moves up to the least such N;
        while a `state reset` re-applies p, each key reads a state it had at or after the reset's offset."""
        messages = world.messages[p]
        keys = [k for k in KEYS if partition_of(k) == p]
        lo = world.lo[p]
        state = state_at(messages, lo)
        reachable = {k: {state.get(k)} for k in keys}  # what each key read at some offset from lo on
        for key, value in messages[lo:]:
            reachable[key].add(value)
        behind = [k for k in keys if table.get(k) not in reachable[k]]
        if behind:
            raise Violation(self.seed, step, rule, f"{world.topic}[{p}]: {len(behind)} key(s) read a value they no "
                                                   f"longer held at offset {lo} (back in time), e.g. "
                                            + ", ".join(f"{k}: {table.get(k)!r} (then {state.get(k)!r})" for k in behind[:5]))
        if p in world.reset:
            return
        off = {k for k in keys if state.get(k) != table.get(k)}  # the keys the table does not read as after offset n
        n = lo
        while off and n < len(messages):
            key, value = messages[n]
            n += 1
            (off.discard if table.get(key) == value else off.add)(key)
        if off:
            raise Violation(self.seed, step, rule, f"{world.topic}[{p}]: the table reads as after no one offset ≥ {lo} "
                                                   f"(a change lost or applied out of order): "
                                                   + ", ".join(f"{k}={table.get(k)!r}" for k in keys))
        world.lo[p] = n

    # --- rules ------------------------------------------------------------------------------------------------

    def produce(self, world: World, step: int) -> None:
        """Upserts and tombstones to one partition or both: a few hot keys written many times, a delete then a
        re-insert; each partition sealed so that its end offset is exact."""
        import fastavro

        assert isinstance(world, UpsertWorld)
        parsed = fastavro.parse_schema(VALUE_SCHEMA)
        batches: dict[int, list[Message]] = {}
        for p in self.rng.sample(range(PARTITIONS), self.rng.randint(1, PARTITIONS)):
            keys = [k for k in KEYS if partition_of(k) == p]
            hot = self.rng.sample(keys, self.rng.randint(1, 3))
            batch: list[Message] = []
            for _ in range(self.rng.randint(1, 20)):
                key = self.rng.choice(hot if self.rng.random() < 0.5 else keys)
                dice = self.rng.random()
                if dice < 0.2:
                    batch.append((key, None))
                elif dice < 0.3:
                    batch += [(key, None), (key, self.value(world, key))]
                else:
                    batch.append((key, self.value(world, key)))
            batches[p] = batch

        ends = produce(world.bootstrap, world.topic, {p: [(k.encode(), encoded(parsed, v)) for k, v in batch]
                                                      for p, batch in batches.items()})
        for p, batch in batches.items():
            want = len(world.messages[p]) + len(batch)
            if ends[p] != want:
                raise Violation(self.seed, step, "produce", f"{world.topic}[{p}] ends at {ends[p]}, expected {want} "
                                                            "(the broker's fault, not the job's)")
            world.messages[p] += batch
            world.ends[p] = ends[p]
            world.log.append(f"{step} produced {world.topic}[{p}] +{len(batch)} "
                             f"({sum(v is None for _, v in batch)} tombstones)")

    @staticmethod
    def value(world: World, key: str) -> str:
        """A value never produced before, naming its key."""
        world.next_id += 1
        return f"{key}#{world.next_id}"

    def run_job(self, world: World, step: int) -> None:
        """A run to its end (exit 0: the world is never broken) reads each partition to its end: a range a `state
        reset` asked for is re-applied whole, so the table is again as after one offset."""
        assert isinstance(world, UpsertWorld)
        super().run_job(world, step)
        world.reset.clear()

    def abandon(self, world: World, step: int) -> None:
        """New changes, a run killed at a commit point, then `recover --abandon`: refused once the table commit ran
        (it cannot be undone), else the commit is dropped and the next run re-reads its range; either way the table
        reads as it did after the kill."""
        self.produce(world, step)
        self.run_killed_at_point(world, step)
        self.check(world, step, "run killed", final=False)
        before = self.table_rows(world, step, "abandon")
        super().abandon(world, step)
        self.unchanged(world, step, "abandon", before)

    def compact(self, world: World, step: int) -> None:
        """Data files merged, with or without dedup by the key (which holds each key once already): the table reads
        as before. (A compaction recovers pending commits first, as a run does: recovered here before the table is read.)"""
        self.recover(world, step)
        before = self.table_rows(world, step, "compact")
        args = ["compact", "job.yaml", "--in-process", "--min-files", "2"]
        if self.rng.random() < 0.5:
            args += ["--dedup-key", "_kafka_key"]
        self.cli(world, args, step, "compact", ok=(0,))  # an upsert table is left alone, saying why
        self.unchanged(world, step, "compact", before)

    def unchanged(self, world: World, step: int, rule: str, before: list[dict[str, Any]]) -> None:
        after = self.table_rows(world, step, rule)
        if sorted(map(str, after)) != sorted(map(str, before)):
            raise Violation(self.seed, step, rule, f"the table reads other rows than before: {len(before)} rows → "
                                                   f"{len(after)}, e.g. {sorted(map(str, after))[:3]}")

    def state_reset(self, world: World, step: int) -> None:
        """`state reset --to P=K` with K no later than the table holds P: its changes from K on are applied again."""
        assert isinstance(world, UpsertWorld)
        p = self.rng.randrange(PARTITIONS)
        k = self.rng.randint(0, world.lo[p])
        done = self.cli(world, ["state", "reset", "job.yaml", "--yes", "--dataset", world.topic, "--to", f"{p}={k}"],
                        step, "state reset", ok=(0, 1, 2))
        if done.returncode == 0:
            world.reset[p] = min(k, world.reset.get(p, k))
            world.lo[p] = min(k, world.lo[p])


class DeltaUpsertHistory(UpsertHistory):
    """The same keyed topic kept as a Delta table by key (`publisher: {class: delta, mode: upsert}`: one delta-rs
    merge per commit), read back by delta-rs and by DuckDB over the files its log lists. The oracle and the rules are
    the Iceberg variant's, the commit points the framework's (a merge writes and commits in one call); `compact` must
    leave the table reading as before and exit 0 here too (it exited 1, naming a file delta-rs's merge wrote, until
    the soak found it: seed 3830719005)."""

    kind = "upsert_delta"
    crash_points = CRASH_POINTS

    def job(self, world: World) -> dict[str, Any]:
        job = super().job(world)
        job["publisher"] = {"class": "delta", "table_uri": str(world.root / "lake" / "kv"),
                            **{k: v for k, v in job["publisher"].items() if k not in ("class", "table", "warehouse")}}
        return job

    def table_rows(self, world: World, step: int, rule: str) -> list[dict[str, Any]]:
        """The table's rows as delta-rs reads them (none before the job made it), checked against DuckDB's read of
        the data files its log lists."""
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        try:
            table = DeltaTable(str(world.root / "lake" / "kv"))
        except TableNotFoundError:
            return []
        rows = table.to_pyarrow_table(columns=list(COLUMNS)).to_pylist()
        return self.as_duckdb_reads(rows, table.file_uris(), "delta-rs", step, rule)
