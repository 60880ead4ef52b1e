"""The long soak of the model-based test (tests/support/world_files.py): histories with random seeds, each in a fresh
directory, until `--histories` ran or `--minutes` passed; prints the seed and step of any history that breaks a rule,
which `FilesHistory(seed, steps).run(dir)` replays exactly.

    .venv/bin/python scripts/soak_world.py [--histories 1000] [--steps 20] [--minutes 600] [--seed N]
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from support.world import Violation
from support.world_files import FilesHistory


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--histories", type=int, default=1000)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--minutes", type=float, default=600.0)
    p.add_argument("--seed", type=int, default=None, help="replay one history")
    args = p.parse_args()
    seeds = [args.seed] if args.seed is not None else [random.SystemRandom().randrange(2**32) for _ in range(args.histories)]
    deadline = time.monotonic() + args.minutes * 60
    ran = failed = 0
    for seed in seeds:
        if time.monotonic() > deadline:
            break
        root = Path(tempfile.mkdtemp(prefix=f"soak-{seed}-"))
        try:
            FilesHistory(seed, args.steps).run(root)
        except Violation as exc:
            failed += 1
            print(f"VIOLATION {exc} (kept in {root})", flush=True)
            continue
        ran += 1
        shutil.rmtree(root, ignore_errors=True)
        if ran % 10 == 0:
            print(f"{ran + failed} histories, {failed} violations", flush=True)
    print(f"{ran + failed} histories of {args.steps} steps, {failed} violations")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
