"""postgres_cdc without a server: the slot step reads the watermarks as the state store writes them, snapshot
visibility across the 32-bit xid wrap, LSN text, and the pgoutput decoder on a message cut short."""

from __future__ import annotations

from pathlib import Path

import pytest

from gobblin_py.builtin.sources.postgres_cdc import pgoutput
from gobblin_py.builtin.sources.postgres_cdc.extractor import Snapshot
from gobblin_py.builtin.sources.postgres_cdc.settings import lsn_int, lsn_text
from gobblin_py.builtin.sources.postgres_cdc.slot import SlotAdvanceStep, committed_lsn
from gobblin_py.errors import CommitError
from gobblin_py.state.store import WatermarkFile, writing_at


def test_slot_step_reads_the_state_stores_watermark_files(tmp_path: Path) -> None:
    WatermarkFile(tmp_path, "public.a").write({"lsn": 500})
    WatermarkFile(tmp_path, "sch ema.b/c").write({"lsn": 300})
    assert committed_lsn(str(tmp_path), "public.a") == 500 and committed_lsn(str(tmp_path), "sch ema.b/c") == 300
    assert committed_lsn(str(tmp_path), "public.none") is None
    step = SlotAdvanceStep(url="postgresql://u@127.0.0.1:1/d", password_env=None, slot="s", state_dir=str(tmp_path),
                           datasets=["public.a", "sch ema.b/c"], dataset="public.a")
    assert step.target() == 300 and step.paths() == [str(tmp_path)]


def test_slot_stays_while_a_table_of_the_run_has_not_committed(tmp_path: Path) -> None:
    """Two tables snapshotted in one run end at their own positions (each covers the WAL to its end): b committed
    first at 500 must not move the slot past a's end (300, committed next), or a's changes in between are lost.
    Reproduced in CI: 'slot is at …278, past the committed position of table(s) public.a (…208)'."""
    WatermarkFile(tmp_path, "public.b").write({"lsn": 500})
    step = SlotAdvanceStep(url="postgresql://u@127.0.0.1:1/d", password_env=None, slot="s", state_dir=str(tmp_path),
                           datasets=["public.a", "public.b"], dataset="public.b")
    assert step.target() is None and step.verify()  # nothing to do, and no connection made
    WatermarkFile(tmp_path, "public.a").write({"lsn": 300})
    assert step.target() == 300


def test_slot_step_known_past_a_table_reads_no_further_and_connects_not(tmp_path: Path) -> None:
    """Issue 45: in a run of many tables each table's slot step stops at the first table at or below where the slot is
    known to be (nothing to move), instead of reading every table's watermark; it still connects, and advances, once
    the lowest watermark of them all is past that position."""
    url = "postgresql://u@127.0.0.1:1/d"  # nothing listens: a step that connects fails
    for name, lsn in (("public.b", 900), ("public.c", 300)):
        WatermarkFile(tmp_path, name).write({"lsn": lsn})
    bad = WatermarkFile(tmp_path, "public.a")
    bad.write({"lsn": 500})
    bad.path.write_text("{not json")  # a step that reads it fails naming it
    step = SlotAdvanceStep(url=url, password_env=None, slot="known_past", state_dir=str(tmp_path),
                           datasets=["public.a", "public.b", "public.c"], dataset="public.b")
    step._saw(400)  # as a first step of the run does once it has seen the slot
    assert step.verify()  # the table after its own first (c, 300: below 400): done, a's file never read
    step.execute()  # nothing to move: no connection
    WatermarkFile(tmp_path, "public.c").write({"lsn": 700})
    with pytest.raises(CommitError, match=str(bad.path)):
        step.verify()  # c is past 400 now: every table is read, the unreadable one named
    bad.write({"lsn": 500})
    with pytest.raises(CommitError, match="advance replication slot known_past"):
        step.verify()  # the lowest (500) is past the known 400: it must look at the slot


def test_snapshot_visibility_across_the_xid_wrap() -> None:
    epoch = 5 << 32
    seen = Snapshot(f"{epoch + 100}:{epoch + 110}:{epoch + 105}")
    assert seen.sees(99) and seen.sees(104) and not seen.sees(105) and not seen.sees(110) and not seen.sees(200)
    wrapped = Snapshot(f"{epoch - 10}:{epoch + 3}:")
    assert wrapped.sees(0xFFFFFFF8) and not wrapped.sees(3) and wrapped.sees(2)


def test_lsn_text_round_trip_and_a_cut_message() -> None:
    assert lsn_int("0/16B3748") == 0x16B3748 and lsn_text(lsn_int("1A/FF000001")) == "1A/FF000001"
    with pytest.raises(pgoutput.DecodeError, match="cut short"):
        pgoutput.decode(b"B\x00\x00")
    with pytest.raises(pgoutput.DecodeError, match="not one of protocol version 1"):
        pgoutput.decode(b"S\x00")


def _step(tmp_path: Path, tables: list[str], dataset: str, slot: str) -> SlotAdvanceStep:
    return SlotAdvanceStep(url="postgresql://u@127.0.0.1:1/d", password_env=None, slot=slot, state_dir=str(tmp_path),
                           datasets=tables, dataset=dataset)


def test_slot_steps_of_a_lease_epoch_find_the_lowest_reading_only_the_table_below(tmp_path: Path) -> None:
    """Issue 45: 50 tables snapshotted at rising positions, then committed in order to one end: each table's step
    finds the lowest position of them all, as a read of every file would, without reading the tables above it (a
    run of n tables read n² files). A table above the lowest whose file cannot be read shows it: only a step of a
    new epoch, which has no bounds, reads it and names it."""
    tables = [f"public.t{i:03d}" for i in range(50)]
    with writing_at(7):
        for i, t in enumerate(tables):
            WatermarkFile(tmp_path, t).write({"lsn": 1000 + i})
        assert _step(tmp_path, tables, tables[0], "s50").target() == 1000  # a first step reads every file once
        broken = WatermarkFile(tmp_path, tables[40])
        broken.path.write_text("{not json")
        for i, t in enumerate(tables[:39]):
            WatermarkFile(tmp_path, t).write({"lsn": 5000})  # the table's commit, then its slot step
            assert _step(tmp_path, tables, t, "s50").target() == 1000 + i + 1
    with writing_at(8), pytest.raises(CommitError, match=r"public\.t040\.json is corrupt"):
        _step(tmp_path, tables, tables[0], "s50").target()
    with writing_at(8):
        broken.write({"lsn": 1040})
        for i, t in enumerate(tables[39:-1], start=39):
            WatermarkFile(tmp_path, t).write({"lsn": 5000})
            assert _step(tmp_path, tables, t, "s50").target() == 1000 + i + 1
        WatermarkFile(tmp_path, tables[-1]).write({"lsn": 5000})
        assert _step(tmp_path, tables, tables[-1], "s50").target() == 5000


def test_a_position_read_lower_than_before_in_the_epoch_is_read_again_in_full(tmp_path: Path) -> None:
    """The bounds rest on positions only rising inside a lease epoch. A table found below its bound (a defect, or a
    state edited by hand) drops the bounds: every file is read, and the slot goes no further than the lowest."""
    tables = ["public.a", "public.b", "public.c"]
    with writing_at(3):
        for t, lsn in zip(tables, (500, 600, 700)):
            WatermarkFile(tmp_path, t).write({"lsn": lsn})
        assert _step(tmp_path, tables, "public.a", "back").target() == 500
        WatermarkFile(tmp_path, "public.c").write({"lsn": 300})  # below its bound (700), not the lowest bound
        WatermarkFile(tmp_path, "public.a").write({"lsn": 400})  # below its bound, the lowest: read again
        assert _step(tmp_path, tables, "public.b", "back").target() == 300  # a's fall makes every file read: c's too
    with writing_at(4):  # a `state reset` takes the lease at a new epoch: nothing of epoch 3 is trusted
        WatermarkFile(tmp_path, "public.a").write({"lsn": 800})
        WatermarkFile(tmp_path, "public.c").write({"lsn": 900})
        assert _step(tmp_path, tables, "public.c", "back").target() == 600


def test_a_commit_that_would_move_a_tables_position_back_is_refused(tmp_path: Path) -> None:
    from gobblin_py.api import WorkUnit
    from gobblin_py.builtin.sources.postgres_cdc.settings import PostgresCdcSettings
    from gobblin_py.builtin.sources.postgres_cdc.source import PostgresCdcSource
    from gobblin_py.builtin.sources.postgres_cdc.split import CdcSplit

    source = PostgresCdcSource(PostgresCdcSettings(url="postgresql://u@127.0.0.1:1/d", slot="s", publication="p"))
    split = CdcSplit(table="public.a", schema_name="public", table_name="a", oid=1, columns=["id"], types=[[20, -1, 20]],
                     avro_schema={}, low=900, end=1000, snapshot=False, tables=["public.a"])
    unit = WorkUnit(id="u", dataset="public.a", watermark_key="lsn", low_watermark=900, expected_high_watermark=1000,
                    split=split.packed())
    assert len(source.commit_steps("public.a", [unit], {"lsn": 1000}, str(tmp_path))) == 1
    with pytest.raises(CommitError, match="move its committed position back, from 0/384 to 0/320"):
        source.commit_steps("public.a", [unit], {"lsn": 800}, str(tmp_path))
