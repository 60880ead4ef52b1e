"""The long soak of the two-host chaos test (tests/commit/test_two_host_chaos.py): histories with random seeds, each
in a fresh directory and bucket of one moto S3 server on 127.0.0.1, until `--histories` ran or `--minutes` passed;
prints the pipeline, seed and steps of any history that breaks a rule, which `--pipeline P --seed N` (with the same
`--steps`) replays. Pipelines: files (→ fs), kafka-delta, kafka-iceberg, kafka-upsert (a local Tansu broker the soak
starts; the Iceberg ones a local PostgreSQL for the SQL catalog), or mix (one drawn per history).

    .venv/bin/python scripts/soak_two_hosts.py [--pipeline mix] [--histories 200] [--steps 10] [--minutes 60] [--seed N]
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "tests" / "commit")]

from support.s3_server import LocalS3  # noqa: E402
from test_two_host_chaos import Chaos, KafkaDeltaChaos, KafkaIcebergChaos, KafkaUpsertChaos  # noqa: E402

PIPELINES = ("files", "kafka-delta", "kafka-iceberg", "kafka-upsert")


def chaos(pipeline: str, root: Path, s3: Any, seed: int, stack: contextlib.ExitStack, parts: dict[str, Any]) -> Chaos:
    """The pipeline's history, starting the broker and the catalog's PostgreSQL the first time one needs them."""
    if pipeline == "files":
        return Chaos(root, s3, seed)
    if "broker" not in parts:
        from support.kafka_broker import LocalBroker

        parts["broker"] = stack.enter_context(LocalBroker())
    if pipeline == "kafka-delta":
        return KafkaDeltaChaos(root, s3, seed, parts["broker"].bootstrap)
    if "pg" not in parts:
        from gobblin_py.demo.pg_server import LocalPostgres

        parts["pg"] = stack.enter_context(LocalPostgres())
    kind = KafkaIcebergChaos if pipeline == "kafka-iceberg" else KafkaUpsertChaos
    return kind(root, s3, seed, parts["broker"].bootstrap, parts["pg"])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pipeline", choices=(*PIPELINES, "mix"), default="mix")
    p.add_argument("--histories", type=int, default=200)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--minutes", type=float, default=60)
    p.add_argument("--seed", type=int)
    args = p.parse_args()
    seeds = [args.seed] if args.seed is not None else [random.randrange(2**32) for _ in range(args.histories)]
    deadline, ran, broken = time.monotonic() + 60 * args.minutes, Counter[str](), 0
    parts: dict[str, Any] = {}
    with LocalS3() as s3, contextlib.ExitStack() as stack:
        for seed in seeds:
            if time.monotonic() > deadline:
                break
            pipeline = args.pipeline if args.pipeline != "mix" else random.Random(seed).choice(PIPELINES)
            with tempfile.TemporaryDirectory(prefix=f"soak-two-hosts-{seed}-") as tmp:
                try:
                    chaos(pipeline, Path(tmp), s3, seed, stack, parts).history(args.steps)
                except AssertionError as exc:
                    broken += 1
                    print(f"VIOLATION --pipeline {pipeline} --seed {seed} --steps {args.steps}: {str(exc)[:2000]}",
                          flush=True)
            ran[pipeline] += 1
            if ran.total() % 10 == 0:
                print(f"{ran.total()} histories ({dict(ran)}), {broken} violations", flush=True)
    print(f"two hosts: {ran.total()} histories ({dict(ran)}) of {args.steps} steps, {broken} violations")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
