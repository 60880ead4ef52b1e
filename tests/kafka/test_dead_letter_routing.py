"""A dead-letter topic the job's own source would read is refused before anything runs: under `topic_pattern:
"orders.*"` with `quality.dead_letter.topic: orders.dead-letter` each run read its dead letters back as bad records
and sent them again (1, 2, 3 copies after three runs). The check is on the names (the pattern itself, not the topics
the broker has now), so `validate` needs no broker; a pattern that excludes the topic runs, and its dead letters stay
one copy each however many runs there are."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support.jobs import write_job
from support.kafka_broker import create_topic, produce
from support.kafka_jobs import events, kafka_job, output_ids, read_topic

from gobblin_py.config import load_job
from gobblin_py.errors import ConfigError
from gobblin_py.testing.crash import cli

BAD = [b"{not json", b"[1, 2, 3]"]


def read_values(bootstrap: str, topic: str) -> Counter[bytes]:
    """Every value of `topic`, read to its end with kafka-python's consumer (not the code that wrote it)."""
    return Counter(r.value for r in read_topic(bootstrap, topic))


def job_reading(tmp: Path, bootstrap: str, dlq: str, **source: Any) -> dict[str, Any]:
    """The kafka job with `source` (its topics or topic_pattern) and dead letters to `dlq`."""
    job = kafka_job(tmp, bootstrap, [])
    del job["source"]["topics"]
    job["source"].update(source)
    job["quality"] = {"dead_letter": {"topic": dlq}}
    return job


def refusal(tmp: Path, job: dict[str, Any]) -> str:
    """What `validate` says of `job` (exit 2), as one line; `run` exits 2 too, before it writes anything."""
    write_job(tmp, job)
    checked = cli(["validate", "job.yaml"], tmp)
    assert checked.returncode == 2, checked.stdout + checked.stderr
    ran = cli(["run", "job.yaml", "--in-process"], tmp)
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert not (tmp / "work").exists() and not (tmp / "output").exists()  # nothing ran
    assert "Traceback" not in checked.stderr + ran.stderr
    return " ".join((checked.stdout + checked.stderr).split())


def test_a_pattern_that_matches_its_own_dead_letter_topic_is_refused_naming_both_keys_and_the_fix(tmp_path: Path) -> None:
    said = refusal(tmp_path, job_reading(tmp_path, "127.0.0.1:9", "orders.dead-letter", topic_pattern="orders.*"))
    assert "quality.dead_letter.topic: 'orders.dead-letter' is a topic source.topic_pattern 'orders.*' reads" in said, said
    assert "each run would read its dead letters back as bad records and send them again" in said, said
    assert r"source.exclude_topics: ['orders\.dead-letter']" in said, said
    assert "or name the dead-letter topic so that the source does not read it" in said, said


def test_a_listed_topic_as_dead_letter_topic_is_refused(tmp_path: Path) -> None:
    said = refusal(tmp_path, job_reading(tmp_path, "127.0.0.1:9", "orders", topics=["clicks", "orders"]))
    assert "quality.dead_letter.topic: 'orders' is a topic source.topics reads" in said, said
    assert "remove it from source.topics" in said, said


def test_the_check_is_on_the_names_and_follows_the_sources_own_selection(tmp_path: Path) -> None:
    """Refused: a pattern that matches the topic whether or not it exists now. Accepted: the topic excluded, a pattern
    that does not match it whole (topic_pattern is matched whole), an internal (`__`) name no pattern selects."""
    for dlq, source in [("orders.dead-letter", {"topic_pattern": "orders.*", "exclude_topics": [r"orders\.dead-letter"]}),
                        ("orders.dead-letter", {"topic_pattern": "orders", "exclude_topics": []}),
                        ("dead-letter.orders", {"topic_pattern": "orders.*"}),
                        ("__dead-letter", {"topic_pattern": ".*"}),
                        ("orders.dlq", {"topics": ["orders"]})]:
        job = load_job(write_job(tmp_path, job_reading(tmp_path, "127.0.0.1:9", dlq, **source)))
        assert job.dead_letter is not None, (dlq, source)
    for dlq, source in [("orders.dead-letter", {"topic_pattern": "orders.*", "exclude_topics": ["clicks"]}),
                        ("not-yet-made", {"topic_pattern": ".*"}),
                        ("orders.dead-letter", {"topic_pattern": "orders.*", "exclude_topics": [r"orders\.dead"]})]:
        with pytest.raises(ConfigError, match=re.escape(f"quality.dead_letter.topic: {dlq!r} is a topic")):
            load_job(write_job(tmp_path, job_reading(tmp_path, "127.0.0.1:9", dlq, **source)))


@pytest.mark.kafka
def test_a_pattern_excluding_the_dead_letter_topic_sends_each_bad_record_once_over_three_runs(
        tmp_path: Path, broker, topic: str) -> None:
    """The documented fix on a real broker: `topic_pattern: "<prefix>.*"` with the dead-letter topic excluded. Three
    runs later the dead-letter topic holds each bad record once, and it is no dataset of the job."""
    import orjson

    source, dlq = f"{topic}.orders", f"{topic}.dead-letter"
    create_topic(broker.bootstrap, source, 1)
    create_topic(broker.bootstrap, dlq, 1)
    good = events(10, days=1)
    produce(broker.bootstrap, source, {0: [orjson.dumps(e) for e in good[:5]] + BAD + [orjson.dumps(e) for e in good[5:]]})
    write_job(tmp_path, job_reading(tmp_path, broker.bootstrap, dlq, topic_pattern=f"{re.escape(topic)}\\..*",
                                    exclude_topics=[re.escape(dlq)]))
    for _ in range(3):
        done = cli(["run", "job.yaml", "--in-process"], tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
    assert output_ids(tmp_path / "output", source) == Counter(e["id"] for e in good)
    assert not (tmp_path / "output" / dlq).exists()
    assert read_values(broker.bootstrap, dlq) == Counter(BAD)
