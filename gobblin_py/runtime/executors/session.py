"""The Spark session's lifecycle where it outlives one run: the scheduler's warm session, started by the first run
that needs it, shared by the runs after it, started afresh when its JVM has gone away. The one place that touches
pyspark's private handles (to forget a dead JVM)."""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from typing import Any

from gobblin_py.config.model import JobSpec
from gobblin_py.runtime import interrupt
from gobblin_py.runtime.executors.spark import SparkExecutor

log = logging.getLogger(__name__)


def spark_key(job: JobSpec) -> tuple[str, tuple[tuple[str, str], ...]]:
    """What a session is started with: the master and the conf (the app name is only a label)."""
    return job.spark.master, tuple(sorted((k, str(v)) for k, v in job.spark.conf.items()))


def session_difference(job: tuple[str, tuple[tuple[str, str], ...]], session: tuple[str, tuple[tuple[str, str], ...]]) -> str:
    """`master local[1] (the session's: local[2]), spark.x=3 (the session's: 4)`."""
    mine, theirs = {"master": job[0], **dict(job[1])}, {"master": session[0], **dict(session[1])}
    return ", ".join(f"{k}{' ' if k == 'master' else '='}{mine.get(k, '(unset)')} (the session's: {theirs.get(k, '(unset)')})"
                     for k in sorted(mine.keys() | theirs.keys(), key=lambda k: (k != "master", k)) if mine.get(k) != theirs.get(k))


class WarmSession:
    """The scheduler's one SparkSession: started by the first run that needs it, shared by every run after it,
    started afresh when its JVM has gone away; stopped with the scheduler."""

    def __init__(self, job_dirs: list[str]) -> None:
        current = os.environ.get("PYTHONPATH")  # every scheduled job's directory: user plugins import on the executors
        self.pythonpath = os.pathsep.join(job_dirs + ([current] if current else []))
        self._lock = threading.Lock()
        self._session: Any = None

    def running(self) -> Any:
        """The session if it is up, else None."""
        with self._lock:
            return self._session if self._alive() else None

    def get(self, job: JobSpec) -> tuple[Any, float]:
        """The session, and the seconds spent starting it (0 when it was already up)."""
        with self._lock:
            if self._alive():
                return self._session, 0.0
            if self._session is not None:
                log.warning("the shared Spark session is gone (its JVM stopped): starting a fresh one for %s", job.name)
                self._discard()
            os.environ["PYTHONPATH"] = self.pythonpath
            t0 = time.monotonic()
            starter = SparkExecutor(dataclasses.replace(job, spark=job.spark.model_copy(
                update={"app_name": job.spark.app_name or "gobblin-py:schedule"})))
            try:
                self._session = starter.session()
            except BaseException:
                self._discard()
                raise
            took = time.monotonic() - t0
            log.info("started the shared Spark session on %s in %.1f s (for %s); later runs reuse it", job.spark.master, took, job.name)
            return self._session, took

    def cancel_all(self) -> None:
        """Cancel every Spark job of the session; the runs see a Ctrl-C (recorded as cancelled)."""
        interrupt.request()  # what SIGINT sets in `gobblin-py run`: SparkExecutor.run then raises KeyboardInterrupt
        with self._lock:
            if self._alive():
                try:
                    self._session.sparkContext.cancelAllJobs()
                except Exception:  # noqa: BLE001 - the JVM may be going away; the runs end either way
                    log.debug("cancelling the Spark jobs failed", exc_info=True)

    def stop(self) -> None:
        with self._lock:
            if self._session is not None:
                self._discard()
                log.info("stopped the shared Spark session")

    def _alive(self) -> bool:
        if self._session is None:
            return False
        try:
            return not self._session.sparkContext._jsc.sc().isStopped()
        except Exception:  # noqa: BLE001 - py4j cannot reach the JVM: it is gone
            return False

    def _discard(self) -> None:
        """Stop the session, and forget pyspark's handles on a JVM that died so the next start launches one."""
        from pyspark import SparkContext
        from pyspark.sql import SparkSession, SQLContext

        session, self._session = self._session, None
        if session is not None:
            try:
                session.stop()
            except Exception:  # noqa: BLE001 - a dead JVM cannot be told to stop
                log.debug("stopping the Spark session failed", exc_info=True)
        gateway = SparkContext._gateway
        with SparkContext._lock:
            SparkContext._active_spark_context = None
            SparkContext._gateway = None
            SparkContext._jvm = None
        SparkSession._instantiatedSession = None
        SparkSession._activeSession = None
        SQLContext._instantiatedContext = None
        if gateway is not None:
            try:
                gateway.shutdown()
            except Exception:  # noqa: BLE001 - its JVM is gone already
                log.debug("closing the py4j gateway failed", exc_info=True)
            proc = getattr(gateway, "proc", None)
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
