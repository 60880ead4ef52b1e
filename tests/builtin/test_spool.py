"""The spools of a routed CDC decode (`builtin/sources/spool.py`) read by two processes at once, as Spark's Python workers
on one host read two tables' spools: one decodes while the other waits for it, and each reads its table's messages
once."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

from gobblin_py.builtin.sources.spool import TableSpools

TABLES = ["s.a", "s.b"]


def _read_one(root: str, table: str, out: str) -> None:
    """One worker: `table`'s messages of the shared decode, written one a line to `out`; each decode it runs logged."""
    spools = TableSpools(Path(root), "test", ["range"], TABLES)

    def decode() -> None:
        with open(Path(root) / "decodes.log", "a") as log:
            log.write(f"{table}\n")
        spools.start()
        for n in range(5):
            for t in TABLES:
                spools.append(spools.buffers[t], f"{t}-{n}".encode())
            time.sleep(0.1)  # a slow decode: the other worker arrives meanwhile
        spools.finish()

    got = [m.decode() for m in spools.read(table, decode, "test.spool_read")]
    Path(out).write_text("\n".join(got))


def test_two_processes_share_one_decode(tmp_path: Path) -> None:
    root = tmp_path / "run"
    root.mkdir()
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=_read_one, args=(str(root), t, str(tmp_path / f"{t}.out"))) for t in TABLES]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
        assert w.exitcode == 0
    for t in TABLES:
        assert (tmp_path / f"{t}.out").read_text().splitlines() == [f"{t}-{n}" for n in range(5)], t
    assert len((root / "decodes.log").read_text().splitlines()) == 1, "the range was decoded more than once"
    assert not any(root.glob("test-decode-*")), "a spool was left behind"
