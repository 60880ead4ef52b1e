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
from gobblin_py.state.store import WatermarkFile


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
