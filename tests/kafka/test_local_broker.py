"""The local broker harness: exact end offsets after `produce`, topic creation, pause/resume, clean stop."""

from __future__ import annotations

import os
import socket
import time

import pytest
from support.kafka_broker import (
    BrokerStartError,
    LocalBroker,
    create_topic,
    end_offsets,
    partitions,
    produce,
)

pytestmark = [
    pytest.mark.kafka,
    # kafka-python 3.0.12 loads its protocol schemas with the deprecated importlib.resources API
    pytest.mark.filterwarnings(r"ignore:.*is deprecated\. Use files\(\) instead:DeprecationWarning"),
]


def read_partition(bootstrap: str, topic: str, partition: int, start: int, count: int,
                   timeout: float = 10.0) -> list[tuple[int, bytes]]:
    """(offset, value) of `count` records from `start`, with assign + seek + poll."""
    from kafka import KafkaConsumer, TopicPartition

    tp = TopicPartition(topic, partition)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    try:
        consumer.assign([tp])
        consumer.seek(tp, start)
        out: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                out.extend((r.offset, r.value) for r in records)
        return out
    finally:
        consumer.close()


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_produce_seals_partitions_so_end_offsets_are_exact(broker, topic):
    sizes = {0: 1, 1: 3, 2: 1000, 3: 0}
    create_topic(broker.bootstrap, topic, 4)
    data = {p: [f"{p}-{i}".encode() * 5 for i in range(n)] for p, n in sizes.items()}

    # small batches: partition 2 spans many multi-record batches, the case Tansu's ListOffsets gets wrong
    offsets = produce(broker.bootstrap, topic, data, compression="zstd", producer_config={"batch_size": 2048})

    assert offsets == sizes
    assert end_offsets(broker.bootstrap, topic) == sizes
    assert read_partition(broker.bootstrap, topic, 2, 0, 1000) == list(enumerate(data[2]))
    assert read_partition(broker.bootstrap, topic, 2, 990, 10) == list(enumerate(data[2]))[990:]


def test_produce_appends_after_earlier_records_and_seals_with_a_record_of_the_callers_choosing(broker, topic):
    create_topic(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, {0: [b"a"] * 10, 1: [b"b"] * 3})

    offsets = produce(broker.bootstrap, topic, {0: [b"c"] * 50, 1: []}, seal=lambda p: b"SEAL-%d" % p)

    assert offsets == {0: 10 + 50 + 1, 1: 3 + 0 + 1}
    assert read_partition(broker.bootstrap, topic, 0, 59, 2) == [(59, b"c"), (60, b"SEAL-0")]
    assert read_partition(broker.bootstrap, topic, 1, 3, 1) == [(3, b"SEAL-1")]


def test_without_sealing_tansu_reports_the_last_batchs_base_offset_plus_one(broker, topic):
    """Why `produce` seals. If this fails, Tansu got fixed: sealing is then merely harmless."""
    from kafka import KafkaProducer

    create_topic(broker.bootstrap, topic, 1)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=50, batch_size=1 << 20)
    for i in range(100):
        producer.send(topic, b"%d" % i, partition=0)
    producer.flush()
    producer.close()

    assert end_offsets(broker.bootstrap, topic) == {0: 1}  # one batch at base offset 0 holding 100 records
    assert len(read_partition(broker.bootstrap, topic, 0, 0, 100)) == 100


def test_create_topic_with_4_partitions(broker, topic):
    create_topic(broker.bootstrap, topic, 4)

    assert partitions(broker.bootstrap, topic) == [0, 1, 2, 3]
    assert end_offsets(broker.bootstrap, topic) == {0: 0, 1: 0, 2: 0, 3: 0}


def test_unknown_topic_is_an_error_and_is_not_auto_created(broker, topic):
    from kafka.errors import UnknownTopicOrPartitionError

    with pytest.raises(UnknownTopicOrPartitionError):
        end_offsets(broker.bootstrap, topic)
    with pytest.raises(UnknownTopicOrPartitionError):
        partitions(broker.bootstrap, topic)


def test_a_consumer_times_out_while_the_broker_is_paused_and_works_after_resume(broker, topic):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import KafkaTimeoutError

    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, {0: [b"a", b"b", b"c"]})
    tp = TopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False,
                             request_timeout_ms=3000)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    try:
        broker.pause()
        try:
            assert consumer.poll(timeout_ms=500) == {}  # a paused broker never answers; poll does not raise
            started = time.monotonic()
            with pytest.raises(KafkaTimeoutError):
                consumer.end_offsets([tp], timeout_ms=500)
            assert time.monotonic() - started < 3
        finally:
            broker.resume()

        got: list[bytes] = []
        deadline = time.monotonic() + 10
        while len(got) < 3 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got.extend(r.value for r in records)
        assert got == [b"a", b"b", b"c"]
        assert consumer.end_offsets([tp], timeout_ms=3000) == {tp: 3}
    finally:
        consumer.close()


def test_stop_leaves_no_process_behind():
    broker = LocalBroker().start()
    pid, port, log = broker.pid, broker.port, broker.log_path
    create_topic(broker.bootstrap, "x", 1)

    assert broker.stop() == 0
    assert broker.stop() == 0  # idempotent
    assert gone(pid) and not broker.running
    assert not log.exists()  # its own temporary log is removed
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()


def test_stop_of_a_paused_broker_and_kill_leave_no_process_behind():
    paused = LocalBroker().start()
    paused.pause()
    assert paused.stop(timeout=2) == 0  # SIGCONT after SIGTERM: no need to wait for the SIGKILL
    assert gone(paused.pid)

    killed = LocalBroker().start()
    assert killed.kill() == -9
    assert gone(killed.pid)
    killed.stop()


def test_a_broker_that_does_not_start_is_reported_with_its_output(tmp_path):
    fake = tmp_path / "tansu"
    fake.write_text("#!/bin/sh\necho 'no storage for you' >&2\nexit 3\n")
    fake.chmod(0o755)

    with pytest.raises(BrokerStartError, match=r"(?s)exited with code 3.*no storage for you"):
        LocalBroker(binary=str(fake), log_path=tmp_path / "broker.log", startup_timeout=5).start()
