"""The spools of a routed CDC decode (`builtin/sources/spool.py`) read by two processes at once, as Spark's Python workers
on one host read two tables' spools: one decodes while the other waits for it, and each reads its table's messages
once; and handed over in memory (`in_process`), with no file, unless the decode holds more than `FLUSH_BYTES`."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest

from gobblin_py.builtin.sources import spool
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


def _in_process(root: Path, range_: str, decodes: list[str], messages: int = 5) -> TableSpools:
    """Spools handed over in memory whose decode appends `messages` messages a table and logs itself in `decodes`,
    with whether the decode's folder holds any file once it finished."""
    spools = TableSpools(root, "test", [range_], TABLES, in_process=True)

    def decode() -> None:
        spools.start()
        for n in range(messages):
            for t in TABLES:
                spools.append(spools.buffers[t], f"{t}-{n}".encode())
        spools.finish()
        decodes.append("files" if spools.dir.exists() and any(spools.dir.iterdir()) else "memory")

    spools.decode = decode  # type: ignore[attr-defined]  # the test's handle on it
    return spools


def _read(spools: TableSpools, table: str) -> list[str]:
    return [m.decode() for m in spools.read(table, spools.decode, "test.spool_read")]  # type: ignore[attr-defined]


def test_in_process_decode_is_handed_over_in_memory(tmp_path: Path) -> None:
    """One decode for both tables, no file written, each table its own messages in order; a table read again (a retry
    of its work unit) decodes again and gets them all again."""
    decodes: list[str] = []
    spools = _in_process(tmp_path, "r1", decodes)
    for t in TABLES:
        assert _read(spools, t) == [f"{t}-{n}" for n in range(5)], t
    assert decodes == ["memory"]
    assert not any(tmp_path.glob("test-decode-*")), "a decode held in memory wrote its folder"
    assert spools.dir not in spool._HELD, "the messages read whole were kept"
    assert _read(spools, TABLES[0]) == [f"{TABLES[0]}-{n}" for n in range(5)]
    assert decodes == ["memory", "memory"]


def test_in_process_decode_over_flush_bytes_goes_to_the_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Memory stays bounded: a decode holding more than FLUSH_BYTES writes the spools and their `complete` marker, and
    the tables read them from there, every message once and in order."""
    monkeypatch.setattr(spool, "FLUSH_BYTES", 300)
    decodes: list[str] = []
    spools = _in_process(tmp_path, "r2", decodes, messages=40)
    for t in TABLES:
        assert _read(spools, t) == [f"{t}-{n}" for n in range(40)], t
    assert decodes == ["files"]
    assert spools.dir not in spool._HELD
    assert not any(tmp_path.glob("test-decode-*")), "a spool was left behind"


def test_in_process_decodes_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """At most HELD_DECODES decodes are held in a process; the readers of one dropped for a newer decode decode again,
    and still read every message once."""
    monkeypatch.setattr(spool, "_HELD", {})  # none left by another test
    decodes: list[str] = []
    ranges = [_in_process(tmp_path, f"b{i}", decodes) for i in range(spool.HELD_DECODES + 1)]
    for spools in ranges:
        assert _read(spools, TABLES[0]) == [f"{TABLES[0]}-{n}" for n in range(5)]
    assert len(decodes) == len(ranges) and len(spool._HELD) <= spool.HELD_DECODES
    for spools in reversed(ranges):  # the newest first: the held ones are read before the evicted one decodes again
        assert _read(spools, TABLES[1]) == [f"{TABLES[1]}-{n}" for n in range(5)]
    assert len(decodes) == len(ranges) + 1, "only the evicted decode is read again"
