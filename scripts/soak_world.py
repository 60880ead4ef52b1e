"""The long soak of the model-based test (tests/support/world.py): histories with random seeds, each in a fresh
directory, until `--histories` ran or `--minutes` passed; prints the world, seed, step and steps of any history that
breaks a rule, which `--world W --seed N` (with the same `--steps`) replays. `--world mix` draws a world per history;
a Kafka, upsert or registry world runs against a local Tansu broker the soak starts (a registry world starts its
own schema-registry test server), a CDC world against a local PostgreSQL with logical decoding the soak starts (a
database of its own per history), a MySQL CDC world against a local MariaDB writing a row-based binlog the soak starts
(a database of its own per history), a jdbc world against a local MariaDB (or, for half the seeds, PostgreSQL) the soak starts (a database of its
own per history). `--cdc-enable all` (or a comma-separated list of rules) also draws the CDC world's
rules that are off by default (support.world_cdc.DISABLED). `--sink` is the CDC worlds' (cdc, mysql_cdc): their
upsert tables in Iceberg or Delta, or (`mix`, the default) drawn per history, half and half, so that `--seed N`
replays the sink the soak drew.

    .venv/bin/python scripts/soak_world.py [--world files|kafka|iceberg|delta|upsert|upsert_delta|registry|cdc|mysql_cdc|jdbc|mix] [--histories 1000]
                                           [--steps 20] [--minutes 600] [--seed N] [--cdc-enable all|RULE,…]
                                           [--sink iceberg|delta|mix]
"""

from __future__ import annotations

import argparse
import contextlib
import random
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from support.world import History, Violation  # noqa: E402  (tests/ is put on sys.path first)

WORLDS = ("files", "kafka", "iceberg", "delta", "upsert", "upsert_delta", "registry", "cdc", "mysql_cdc", "jdbc")


def history(world: str, seed: int, steps: int, broker: Any, postgres: Any, cdc_enable: str = "",
            maria: Any = None, sink: str = "mix") -> History:
    """The history of `world` for `seed`; a Kafka, upsert or registry one on `broker`, a CDC one on `postgres`, a MySQL
    CDC or jdbc one on `maria`, each started on first use; a CDC one into `sink` (`mix`: drawn by the seed)."""
    from support.world_keyed import drawn_sink

    sink = drawn_sink(seed) if sink == "mix" else sink
    if world == "jdbc":
        from support.world_jdbc import JdbcHistory

        return JdbcHistory(seed, steps, maria(), postgres=postgres)  # PostgreSQL for half the seeds
    if world == "mysql_cdc":
        from support.world_mysql_cdc import MysqlCdcHistory

        return MysqlCdcHistory(seed, steps, maria(), catalog=postgres, sink=sink)  # postgres: a leased history's catalog
    if world == "cdc":
        from support.world_cdc import DISABLED, CdcHistory

        enabled = set(DISABLED) if cdc_enable == "all" else {r for r in cdc_enable.split(",") if r}
        return CdcHistory(seed, steps, postgres(), disabled=DISABLED - enabled, sink=sink)
    if world == "registry":
        from support.world_registry import RegistryHistory

        return RegistryHistory(seed, steps, broker().bootstrap)
    if world == "upsert":
        from support.world_upsert import UpsertHistory

        return UpsertHistory(seed, steps, broker().bootstrap)
    if world == "upsert_delta":
        from support.world_upsert import DeltaUpsertHistory

        return DeltaUpsertHistory(seed, steps, broker().bootstrap)
    if world == "kafka":
        from support.world_kafka import KafkaHistory

        return KafkaHistory(seed, steps, broker().bootstrap)
    if world == "iceberg":
        from support.world_iceberg import IcebergHistory

        return IcebergHistory(seed, steps)
    if world == "delta":
        from support.world_delta import DeltaHistory

        return DeltaHistory(seed, steps)
    from support.world_files import FilesHistory

    return FilesHistory(seed, steps)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--world", choices=[*WORLDS, "mix"], default="files")
    p.add_argument("--histories", type=int, default=1000)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--minutes", type=float, default=600.0)
    p.add_argument("--seed", type=int, default=None, help="replay one history")
    p.add_argument("--cdc-enable", default="", help="the CDC world also draws these of its rules off by default: "
                                                    "all, or a comma-separated list (support.world_cdc.DISABLED)")
    p.add_argument("--sink", choices=["iceberg", "delta", "mix"], default="mix",
                   help="the CDC worlds' upsert tables: Iceberg, Delta, or drawn per history (mix)")
    args = p.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stopped: the servers it started are stopped too
    system = random.SystemRandom()
    seeds = [args.seed] if args.seed is not None else [system.randrange(2**32) for _ in range(args.histories)]
    deadline = time.monotonic() + args.minutes * 60
    ran: dict[str, int] = dict.fromkeys(WORLDS, 0)
    failed: dict[str, int] = dict.fromkeys(WORLDS, 0)
    with contextlib.ExitStack() as stack:
        started: list[Any] = []

        def broker() -> Any:
            if not started:
                from support.kafka_broker import LocalBroker

                started.append(stack.enter_context(LocalBroker()))
            return started[0]

        servers: list[Any] = []

        def postgres() -> Any:
            if not servers:
                from support.world_cdc import LOGICAL

                from gobblin_py.demo.pg_server import LocalPostgres

                servers.append(stack.enter_context(LocalPostgres(LOGICAL)))
            return servers[0]

        marias: list[Any] = []

        def maria() -> Any:
            if not marias:
                from jdbc_mysql.mariadb_server import LocalMariaDB

                marias.append(stack.enter_context(LocalMariaDB(binlog=True)))
            return marias[0]

        for seed in seeds:
            if time.monotonic() > deadline:
                break
            world = system.choice(WORLDS) if args.world == "mix" else args.world
            root = Path(tempfile.mkdtemp(prefix=f"soak-{world}-{seed}-"))
            ran[world] += 1
            drawn = history(world, seed, args.steps, broker, postgres, args.cdc_enable, maria, args.sink)
            try:
                drawn.run(root)
            except Violation as exc:
                failed[world] += 1
                steps = "\n    ".join(exc.log)
                sink = f" --sink {drawn.sink}" if hasattr(drawn, "sink") else ""
                print(f"VIOLATION --world {world} --seed {seed}{sink}: {exc} (kept in {root})\n    {steps}", flush=True)
                continue
            shutil.rmtree(root, ignore_errors=True)
            if sum(ran.values()) % 10 == 0:
                print(f"{sum(ran.values())} histories, {sum(failed.values())} violations", flush=True)
    for world in WORLDS:
        if ran[world]:
            print(f"{world}: {ran[world]} histories of {args.steps} steps, {failed[world]} violations")
    return 1 if any(failed.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
