"""A real standalone Spark cluster on 127.0.0.1 for tests: master and workers started from the pyspark package."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import pyspark

from support.kafka_broker import free_port

SPARK_HOME = Path(pyspark.__file__).parent


class LocalSparkCluster:
    """`spark-class ...Master` and one `...Worker` per `start_worker()`; each in its own process group."""

    def __init__(self, cores: int = 2, memory: str = "1g") -> None:
        self.cores, self.memory = cores, memory
        self.port, self.ui_port = free_port(), free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="spark-cluster-"))
        self.master: subprocess.Popen[bytes] | None = None
        self.workers: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _env(self) -> dict[str, str]:
        return {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1",
                "SPARK_LOG_DIR": str(self.dir), "SPARK_WORKER_DIR": str(self.dir / "work")}

    def _spark_class(self, *args: str, log: str) -> subprocess.Popen[bytes]:
        out = open(self.dir / log, "ab")
        return subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), *args], env=self._env(), stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)

    def state(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as r:
            return json.loads(r.read())

    def alive_workers(self) -> int:
        try:
            return sum(1 for w in self.state().get("workers", []) if w.get("state") == "ALIVE")
        except OSError:
            return 0

    def start(self) -> LocalSparkCluster:
        self.master = self._spark_class("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(self.port),
                                        "--webui-port", str(self.ui_port), log="master.log")
        self._wait(lambda: self.state() is not None, "the master")
        self.start_worker()
        return self

    def start_worker(self) -> subprocess.Popen[bytes]:
        before = self.alive_workers()
        worker = self._spark_class("org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", str(self.cores),
                                   "--memory", self.memory, "--webui-port", str(free_port()), "--work-dir", str(self.dir / "work"),
                                   self.url, log=f"worker{len(self.workers)}.log")
        self.workers.append(worker)
        self._wait(lambda: self.alive_workers() > before, "a worker")
        return worker

    def kill_worker(self, worker: subprocess.Popen[bytes]) -> None:
        """SIGKILL a worker with its executors, as a lost machine."""
        try:
            os.killpg(worker.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        worker.wait()

    def _wait(self, ready: Any, what: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if ready():
                    return
            except OSError:
                pass
            time.sleep(0.3)
        logs = "\n".join(p.read_text(errors="replace")[-2000:] for p in sorted(self.dir.glob("*.log")))
        raise RuntimeError(f"{what} did not come up in {timeout:.0f} s:\n{logs}")

    def stop(self) -> None:
        for proc in [*self.workers, self.master]:
            if proc is not None and proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                    proc.wait(timeout=10)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)  # its logs and the workers' directories: nothing left behind

    def __enter__(self) -> LocalSparkCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
