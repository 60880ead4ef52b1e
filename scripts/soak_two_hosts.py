"""The long soak of the two-host chaos test (tests/commit/test_two_host_chaos.py): histories with random seeds, each
in a fresh directory and bucket of one moto S3 server on 127.0.0.1, until `--histories` ran or `--minutes` passed;
prints the seed and steps of any history that breaks a rule, which `--seed N` (with the same `--steps`) replays.

    .venv/bin/python scripts/soak_two_hosts.py [--histories 200] [--steps 10] [--minutes 60] [--seed N]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "tests" / "commit")]

from support.s3_server import LocalS3  # noqa: E402
from test_two_host_chaos import Chaos  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--histories", type=int, default=200)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--minutes", type=float, default=60)
    p.add_argument("--seed", type=int)
    args = p.parse_args()
    seeds = [args.seed] if args.seed is not None else [random.randrange(2**32) for _ in range(args.histories)]
    deadline, ran, broken = time.monotonic() + 60 * args.minutes, 0, 0
    with LocalS3() as s3:
        for seed in seeds:
            if time.monotonic() > deadline:
                break
            with tempfile.TemporaryDirectory(prefix=f"soak-two-hosts-{seed}-") as tmp:
                chaos = Chaos(Path(tmp), s3, seed)
                try:
                    chaos.history(args.steps)
                except AssertionError as exc:
                    broken += 1
                    print(f"VIOLATION --seed {seed} --steps {args.steps}: {str(exc)[:2000]}", flush=True)
            ran += 1
            if ran % 10 == 0:
                print(f"{ran} histories, {broken} violations", flush=True)
    print(f"two hosts: {ran} histories of {args.steps} steps, {broken} violations")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
