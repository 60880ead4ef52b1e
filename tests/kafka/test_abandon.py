"""`recover --abandon` of a partly published commit, then more records, then a run: every record is in the output
once. The abandoned commit's published files are removed (they are byte-identical to what the record describes), so
the next run's re-extraction of the grown range, under new names, doubles nothing; the listing names them."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.jobs import write_job
from support.kafka_jobs import events, kafka_job, new_topic, output_ids, produce_events

from gobblin_py.testing.crash import SIGKILLED, cli

pytestmark = [pytest.mark.kafka, pytest.mark.crash]
RUN = ["run", "job.yaml", "--in-process"]


def test_abandon_then_a_grown_range_publishes_each_record_once(tmp_path: Path, broker, topic: str) -> None:
    data = new_topic(broker.bootstrap, topic, 2, 60)  # 2 partitions x 3 days: 6 files
    write_job(tmp_path, kafka_job(tmp_path, broker.bootstrap, [topic]))
    assert cli(RUN, tmp_path, crash_at="commit.after_step:2").returncode == SIGKILLED  # 2 of 6 files published
    published = sorted(p for p in (tmp_path / "output").rglob("*.avro"))
    assert len(published) == 2
    abandoned = cli(["recover", "job.yaml", "--dataset", topic, "--abandon", "--yes"], tmp_path)
    assert abandoned.returncode == 0, abandoned.stdout + abandoned.stderr
    for path in published:
        assert str(path) in abandoned.stdout, abandoned.stdout  # named in the listing
    more = {p: [{**e, "id": e["id"] + 10_000} for e in events(40)] for p in (0, 1)}
    produce_events(broker.bootstrap, topic, more)
    again = cli(RUN, tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    ids = output_ids(tmp_path / "output", topic)
    expected = {e["id"] for evs in [*data.values(), *more.values()] for e in evs}
    assert set(ids) == expected
    assert set(ids.values()) == {1}, f"doubled: {sum(n > 1 for n in ids.values())} ids"
