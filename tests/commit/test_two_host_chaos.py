"""Two hosts, one job, chaos (issue 43): two drivers of one job whose work directory and output are on an object store
(moto's S3 server), each "host" a process with a temp directory, cwd and environment of its own, sharing only the
store (and the broker). A seeded schedule of runs on either host, runs killed (SIGKILL) at a random commit point, runs
overlapping on both hosts, a driver frozen (SIGSTOP) at a commit point past its lease's expiry while the other host
takes the job over, then woken (the zombie), and new input arriving between them. After every step no record is
published twice; at the end, after one clean run, every record exactly once. Two pipelines: files → the fs publisher
(read with the Apache `avro` package) and a Kafka topic → a Delta table on the store (read with delta-rs and DuckDB).
`scripts/soak_two_hosts.py` runs it with random seeds."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support.jobs import example_job, run_cli, write_job
from support.world import avro_ids

from gobblin_py.crashpoints import ENV as CRASH_ENV
from gobblin_py.crashpoints import PAUSE_ENV

pytestmark = [pytest.mark.crash, pytest.mark.s3]

TTL = 3
POINTS = ("commit.before_store_write", "commit.store_write_midway", "commit.after_store_write", "commit.after_step",
          "commit.copy_verified", "commit.before_record_removal", "commit.after_record_removal")
PAUSES = ("commit.store_write_midway", "commit.after_store_write", "commit.after_step", "commit.step_fenced")
"""Where a driver is frozen: the last, after its lease was checked and before the step begins, is the window the check
alone leaves (the step's state records, written at the lease's epoch, refuse it)."""
HELD = "is running elsewhere"
STARVED = ("lost the lease", "expired before this commit step")
"""What a run says whose lease expired because it got no CPU for a TTL (a loaded machine): it commits nothing more and
exits 1, which the protocol allows at any time; the next run recovers what it left."""


class Chaos:
    """One seeded history of a files → fs job; `log` says what each step did (printed by the soak when a rule breaks).
    A subclass is another pipeline: its job, its input arriving (`waiting`, `arrive`) and what a reader finds."""

    kind = "files"

    def __init__(self, root: Path, s3: Any, seed: int) -> None:
        self.root, self.s3, self.seed = root, s3, seed
        self.rng = random.Random(seed)
        self.bucket = s3.new_bucket()
        self.log: list[str] = [f"{self.kind} seed {seed}"]
        self.hosts = [root / "host-a", root / "host-b"]
        for host in self.hosts:
            host.mkdir()
        self.waiting: list[Any] = []
        self.job = write_job(root, self.new_job())

    def shared(self) -> dict[str, Any]:
        """The job's settings that put it on the store for both hosts: work directory, filesystems, a short lease."""
        return {"work_dir": f"s3://{self.bucket}/work", "filesystems": self.s3.options, "lease": {"ttl": TTL}}

    def new_job(self) -> dict[str, Any]:
        job = example_job(self.root, publisher={"final_dir": f"s3://{self.bucket}/output"})
        job["job"].update(self.shared())
        self.incoming = self.root / "incoming"  # the example's files arrive into data/ a few at a time
        shutil.move(self.root / "data", self.incoming)
        (self.root / "data").mkdir()
        self.waiting = sorted(p.relative_to(self.incoming) for p in self.incoming.rglob("*") if p.is_file())
        self.rng.shuffle(self.waiting)
        return job

    def env(self, host: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
        return {**{k: v for k, v in os.environ.items() if k not in (CRASH_ENV, PAUSE_ENV)}, "TMPDIR": str(host),
                **(extra or {})}

    def start(self, host: Path, extra: dict[str, str] | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-m", "gobblin_py.cli.main", "run", str(self.job), "--in-process"],
                                cwd=host, env=self.env(host, extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)

    def run(self, host: Path, what: str, ok: tuple[int, ...], extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        done = run_cli("run", str(self.job), "--in-process", cwd=host, env=self.env(host, extra))
        self.log.append(f"{what} on {host.name} -> {done.returncode}")
        starved = done.returncode == 1 and any(s in done.stderr for s in STARVED)
        assert done.returncode in ok or starved, f"{self.log}\n{done.stdout}{done.stderr}"
        assert "Traceback" not in done.stderr and "internal error" not in done.stderr, f"{self.log}\n{done.stderr}"
        return done

    def published(self) -> Counter[int]:
        return avro_ids(self.s3.download(f"{self.bucket}/output", self.root / "read"))

    def expected(self) -> Counter[int]:
        """Every record once: the same input, one run, one host, a local work directory."""
        alone = self.root / "alone"
        alone.mkdir()
        shutil.copytree(self.incoming, alone / "data")
        assert run_cli("run", str(write_job(alone, example_job(alone))), "--in-process").returncode == 0
        return avro_ids(alone / "output")

    def check(self) -> None:
        twice = sorted(i for i, n in self.published().items() if n > 1)
        assert not twice, f"published twice: {twice[:10]} after {self.log}"

    # --- the steps ------------------------------------------------------------------------------------------------
    def arrive(self) -> None:
        for rel in self.waiting[:self.rng.randint(1, 2)]:
            dest = self.root / "data" / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(self.incoming / rel, dest.with_name(dest.name + ".part"))
            os.replace(dest.with_name(dest.name + ".part"), dest)  # whole, as producers should
            self.waiting.remove(rel)
            self.log.append(f"arrived {rel}")

    def clean_run(self) -> None:
        self.run(self.rng.choice(self.hosts), "run", ok=(0,))  # (or starved: see STARVED)

    def killed(self) -> None:
        self.arrive()  # something to commit, so that the point is reached
        point = self.rng.choice(POINTS)
        self.run(self.rng.choice(self.hosts), f"run killed at {point}", ok=(0, -signal.SIGKILL),
                 extra={CRASH_ENV: point})  # 0: nothing to commit, so the point was never reached

    def overlapping(self) -> None:
        procs = [self.start(host) for host in self.hosts]
        ends = [(p.wait(timeout=300), p.communicate()) for p in procs]
        codes = [code for code, _ in ends]
        self.log.append(f"overlapping runs -> {codes}")
        for code, (_, err) in ends:
            assert code == 0 or (code == 1 and (HELD in err or any(s in err for s in STARVED))), f"{self.log}\n{err}"

    def paused(self) -> None:
        self.arrive()
        zombie_host, other = self.rng.sample(self.hosts, 2)
        point = self.rng.choice(PAUSES)
        zombie = self.start(zombie_host, {PAUSE_ENV: point})
        try:
            while not _stopped(zombie.pid) and zombie.poll() is None:
                time.sleep(0.05)
            if zombie.poll() is not None:  # nothing to commit: it never reached the point
                self.log.append(f"run on {zombie_host.name} ended before {point} -> {zombie.returncode}")
                return
            self.log.append(f"run on {zombie_host.name} frozen at {point}")
            beside = self.run(other, "run beside the frozen driver", ok=(0, 1))
            # refused while the frozen driver's lease is live; taken over, saying so, only if it had expired by then
            said = "took over the lease" if beside.returncode == 0 else HELD
            assert said in beside.stderr or any(s in beside.stderr for s in STARVED), f"{self.log}\n{beside.stderr}"
            time.sleep(TTL + 0.5)  # its lease expires: the other host takes the job over
            self.run(other, "run taking the job over", ok=(0,))  # (or starved: see STARVED)
        finally:
            zombie.send_signal(signal.SIGCONT)
            out, err = zombie.communicate(timeout=300)
        self.log.append(f"woken driver on {zombie_host.name} -> {zombie.returncode}")
        assert zombie.returncode == 1 and "lost the lease" in out + err, f"{self.log}\n{out}{err}"

    def history(self, steps: int) -> None:
        self.arrive()
        rules = [(1, self.arrive), (2, self.clean_run), (3, self.killed), (1, self.overlapping), (2, self.paused)]
        for _ in range(steps):
            rule = self.rng.choices([r for _, r in rules], [w for w, _ in rules])[0]
            rule()
            self.check()
        while self.waiting:
            self.arrive()
        for _ in range(3):  # a final run starved of its lease (STARVED) is run again
            if self.run(self.rng.choice(self.hosts), "final run", ok=(0,)).returncode == 0:
                break
        found = self.published()
        expected = self.expected()
        missing = sorted(set(expected) - set(found))
        assert found == expected, f"missing {missing[:10]}, twice {sorted(i for i, n in found.items() if n > 1)[:10]} after {self.log}"


class KafkaDeltaChaos(Chaos):
    """A Kafka topic (two partitions) → a Delta table on the store: batches of events arrive on the topic; the table
    is read with delta-rs and, at the end, with DuckDB too. The failover of issue 43 (a driver back from a kill
    counting another's Delta commit as its own) is one of the shapes it draws."""

    kind = "kafka-delta"

    def __init__(self, root: Path, s3: Any, seed: int, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        super().__init__(root, s3, seed)

    def new_job(self) -> dict[str, Any]:
        from support.kafka_broker import create_topic
        from support.kafka_jobs import kafka_job

        self.topic = f"c{self.seed}_{uuid.uuid4().hex[:8]}"
        self.data = random.Random(self.seed + 1)  # what the batches hold: drawn apart, so that every pipeline's
        # schedule of steps is the same for a seed
        create_topic(self.bootstrap, self.topic, 2)
        self.waiting = [self.rng.randint(5, 40) for _ in range(self.rng.randint(10, 14))]  # batch sizes to come
        self.produced: Counter[int] = Counter()
        job = kafka_job(self.root, self.bootstrap, [self.topic])
        job["job"].update(self.shared())
        job["writer"] = {"class": "parquet"}
        job["publisher"] = {"class": "delta", "table_uri": f"{self.table_uri()}", "storage_options": self.delta_options()}
        job["spark"] = {"master": "local[1]"}
        return job

    def table_uri(self) -> str:
        return f"s3://{self.bucket}/lake/{{dataset}}"

    def delta_options(self) -> dict[str, str]:
        return {"AWS_ENDPOINT_URL": self.s3.endpoint, "AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1"}

    def arrive(self) -> None:
        from support.kafka_jobs import events, produce_events

        for size in self.waiting[:self.rng.randint(1, 2)]:
            batch = events(size)
            split = self.data.randint(0, size)
            produce_events(self.bootstrap, self.topic, {p: evs for p, evs in ((0, batch[:split]), (1, batch[split:])) if evs})
            self.produced.update(e["id"] for e in batch)
            self.waiting.remove(size)
            self.log.append(f"arrived {size} events")

    def table(self) -> Any:
        import deltalake

        try:
            return deltalake.DeltaTable(self.table_uri().format(dataset=self.topic), storage_options=self.delta_options())
        except deltalake.exceptions.TableNotFoundError:
            return None

    def published(self) -> Counter[int]:
        t = self.table()
        return Counter() if t is None else Counter(t.to_pyarrow_table(columns=["id"]).column("id").to_pylist())

    def expected(self) -> Counter[int]:
        import duckdb

        t = self.table()
        assert t is not None, f"no table after {self.log}"
        prefix = f"{self.bucket}/lake/{self.topic}"  # DuckDB reads the files the table's log lists, downloaded
        read = self.s3.download(prefix, self.root / "read-delta")
        files = [read / uri.removeprefix(f"s3://{prefix}/") for uri in t.file_uris()]
        by_duckdb = Counter(r[0] for r in duckdb.connect().execute(
            "SELECT id FROM read_parquet(?)", [[str(f) for f in files]]).fetchall())
        assert by_duckdb == self.published(), f"DuckDB and delta-rs disagree after {self.log}"
        return Counter(dict.fromkeys(self.produced, 1))


class KafkaIcebergChaos(KafkaDeltaChaos):
    """A Kafka topic → an Iceberg table: pyiceberg's SQL catalog on PostgreSQL (pgserver's), shared by both hosts, and
    the warehouse on the store; read with pyiceberg's scan and, at the end, DuckDB over the files it lists."""

    kind = "kafka-iceberg"

    def __init__(self, root: Path, s3: Any, seed: int, bootstrap: str, pg: Any) -> None:
        self.pg = pg
        super().__init__(root, s3, seed, bootstrap)

    def new_job(self) -> dict[str, Any]:
        job = super().new_job()
        self.database = self.pg.create_database(f"cat_{uuid.uuid4().hex[:10]}")
        self.catalog_uri = self.pg.url(self.database).replace("postgresql://", "postgresql+psycopg://")
        job["publisher"] = {"class": "iceberg", "table": "db.{dataset}", "warehouse": f"s3://{self.bucket}/wh",
                            "catalog": {"name": "shared", "type": "sql", "uri": self.catalog_uri}}
        return job

    def env(self, host: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
        from gobblin_py.demo.pg_server import PASSWORD

        return super().env(host, {"PGPASSWORD": PASSWORD, **(extra or {})})  # the catalog's password, from libpq's env

    def table(self) -> Any:
        from pyiceberg.catalog.sql import SqlCatalog
        from pyiceberg.exceptions import NoSuchTableError

        from gobblin_py.demo.pg_server import PASSWORD, USER

        uri = self.catalog_uri.replace(f"//{USER}@", f"//{USER}:{PASSWORD}@")
        catalog = SqlCatalog("shared", uri=uri, **{"s3.endpoint": self.s3.endpoint, "s3.region": "us-east-1"})
        try:
            return catalog.load_table(f"db.{self.topic}")
        except NoSuchTableError:
            return None

    def published(self) -> Counter[int]:
        t = self.table()
        return Counter() if t is None else Counter(t.scan(selected_fields=("id",)).to_arrow().column("id").to_pylist())

    def expected(self) -> Counter[int]:
        import duckdb

        t = self.table()
        assert t is not None, f"no table after {self.log}"
        read = self.s3.download(f"{self.bucket}/wh", self.root / "read-iceberg")
        files = [read / task.file.file_path.removeprefix(f"s3://{self.bucket}/wh/") for task in t.scan().plan_files()]
        by_duckdb = Counter(r[0] for r in duckdb.connect().execute(
            "SELECT id FROM read_parquet(?, union_by_name = true)", [[str(f) for f in files]]).fetchall())
        assert by_duckdb == self.published(), f"DuckDB and pyiceberg disagree after {self.log}"
        return Counter(dict.fromkeys(self.produced, 1))


class KafkaUpsertChaos(KafkaIcebergChaos):
    """A keyed topic with tombstones → an Iceberg table in upsert mode (`key: [_kafka_key]`, `order_by:
    [_kafka_offset]`): batches update a few hot keys many times, delete keys, delete and re-insert one. The oracle is by
    key: after every step no key is twice in the table and every row is a message of its key (never a tombstone's);
    at the end the table is each key's last value, without the deleted keys."""

    kind = "kafka-upsert"
    KEYS = tuple(f"k{i:02d}" for i in range(12))

    def new_job(self) -> dict[str, Any]:
        job = super().new_job()
        from support.world_upsert import VALUE_SCHEMA

        schema = self.root / "value.avsc"
        schema.write_text(json.dumps(VALUE_SCHEMA))
        job["source"] |= {"deserializer": "avro", "avro_schema": str(schema), "metadata_columns": ["key", "offset"],
                          "tombstones": "delete"}
        del job["converters"]
        job["publisher"] |= {"mode": "upsert", "key": ["_kafka_key"], "order_by": ["_kafka_offset"],
                             "delete_when": {"column": "_kafka_deleted", "equals": [True]}}
        self.messages: dict[int, list[tuple[str, str | None]]] = {0: [], 1: []}
        self.next_value = 0
        return job

    def arrive(self) -> None:
        import fastavro
        from support.kafka_broker import produce
        from support.world_upsert import VALUE_SCHEMA, encoded

        parsed = fastavro.parse_schema(VALUE_SCHEMA)

        for size in self.waiting[:self.rng.randint(1, 2)]:
            hot = self.data.sample(self.KEYS, 2)
            batch: dict[int, list[tuple[str, str | None]]] = {}
            for _ in range(size):
                key = self.data.choice(hot if self.data.random() < 0.5 else self.KEYS)
                self.next_value += 1
                dice = self.data.random()
                change = [(key, None)] if dice < 0.2 else [(key, None), (key, f"{key}#{self.next_value}")] if dice < 0.3 \
                    else [(key, f"{key}#{self.next_value}")]
                batch.setdefault(int(key[1:]) % 2, []).extend(change)
            ends = produce(self.bootstrap, self.topic, {p: [(k.encode(), encoded(parsed, v)) for k, v in b] for p, b in batch.items()})
            for p, b in batch.items():
                self.messages[p] += b
                assert ends[p] == len(self.messages[p]), f"{self.topic}[{p}] ends at {ends[p]} (the broker's fault)"
            self.waiting.remove(size)
            self.log.append(f"arrived {sum(map(len, batch.values()))} changes")

    def rows(self) -> list[dict[str, Any]]:
        t = self.table()
        if t is None:
            return []
        return t.scan(selected_fields=("_kafka_key", "_kafka_offset", "v", "_kafka_deleted")).to_arrow().to_pylist()

    def published(self) -> Counter[Any]:
        return Counter((r["_kafka_key"], r["v"]) for r in self.rows())

    def check(self) -> None:
        keys: Counter[str] = Counter()
        for r in self.rows():
            key, offset = r["_kafka_key"], r["_kafka_offset"]
            messages = self.messages[int(key[1:]) % 2]
            assert 0 <= offset < len(messages) and messages[offset] == (key, r["v"]) and not r["_kafka_deleted"], \
                f"row {r} is no message of its key after {self.log}"
            keys[key] += 1
        twice = sorted(k for k, n in keys.items() if n > 1)
        assert not twice, f"keys twice in the table: {twice} after {self.log}"

    def expected(self) -> Counter[Any]:
        last: dict[str, str | None] = {}
        for p in (0, 1):
            for key, value in self.messages[p]:
                last[key] = value
        return Counter({(k, v): 1 for k, v in last.items() if v is not None})


def drawn(chaos: Chaos, seed: int, also: tuple[str, ...] = ()) -> None:
    """Run the history; its seed must still draw a kill at a commit point, a frozen driver taken over and woken,
    overlapping runs (and `also`): a test whose seed stops drawing them fails, saying to pick another."""
    chaos.history(steps=7)
    log = "\n".join(chaos.log)
    for what in ("-> -9", "woken driver", "overlapping runs", *also):
        assert what in log, f"seed {seed} no longer draws {what!r}: pick another\n{log}"


def _stopped(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "T"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("seed", [3, 19])
def test_two_hosts_under_kills_overlaps_and_a_frozen_driver_publish_every_record_once(tmp_path: Path, s3: Any,
                                                                                       seed: int) -> None:
    """Seeds drawn so that each has a run killed at a commit point, a driver frozen past its lease, taken over and
    woken, and overlapping runs on both hosts (the test fails if one stops doing so)."""
    pytest.importorskip("obstore")
    drawn(Chaos(tmp_path, s3, seed), seed, also=("frozen at commit.step_fenced",) if seed == 19 else ())


@pytest.mark.kafka
@pytest.mark.parametrize("seed", [3, 26])
def test_two_hosts_on_one_delta_table_from_kafka_publish_every_record_once(tmp_path: Path, s3: Any, broker: Any,
                                                                          seed: int) -> None:
    """The same chaos, Kafka → Delta on the store: the seed draws a kill at a commit point, a frozen driver taken over
    and woken, and overlapping runs (the test fails if it stops doing so)."""
    pytest.importorskip("obstore")
    drawn(KafkaDeltaChaos(tmp_path, s3, seed, broker.bootstrap), seed)


@pytest.fixture(scope="module")
def pg() -> Any:
    """A PostgreSQL (pgserver's) for the Iceberg SQL catalog both hosts share."""
    pytest.importorskip("pgserver", reason="needs pgserver (pip install -e '.[test]')")
    from gobblin_py.demo.pg_server import LocalPostgres

    with LocalPostgres() as server:
        yield server


@pytest.mark.kafka
@pytest.mark.postgres
@pytest.mark.parametrize("seed", [13])
def test_two_hosts_on_one_iceberg_table_from_kafka_publish_every_record_once(tmp_path: Path, s3: Any, broker: Any,
                                                                            pg: Any, seed: int) -> None:
    """The same chaos, Kafka → Iceberg: the SQL catalog on PostgreSQL, the warehouse on the store."""
    pytest.importorskip("obstore")
    drawn(KafkaIcebergChaos(tmp_path, s3, seed, broker.bootstrap, pg), seed)


@pytest.mark.kafka
@pytest.mark.postgres
@pytest.mark.parametrize("seed", [29])
def test_two_hosts_on_one_upsert_table_from_a_keyed_topic_keep_every_key_once(tmp_path: Path, s3: Any, broker: Any,
                                                                            pg: Any, seed: int) -> None:
    """The same chaos, a keyed topic with tombstones → an Iceberg upsert table (catalog on PostgreSQL, warehouse on
    the store): no key twice after any step, each key's last value at the end."""
    pytest.importorskip("obstore")
    drawn(KafkaUpsertChaos(tmp_path, s3, seed, broker.bootstrap, pg), seed)
