"""Runs tasks on Spark: one Spark task per WorkUnit or MultiWorkUnit, results collected to the driver.

Spark starts (in a background thread) only when a run has tasks for it: a run with no new data never starts it,
and a plan the Source estimates under `spark.in_driver_below` runs in the driver's threads, sparing Spark's start
(~3 s), weighed by what of its work holds Python's lock and what Spark's slots could gain on it
(`base.plan_held_bytes`: a plan of one task stays in the driver on a local master).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gobblin_py.commit.tasks import CommitTasks
from gobblin_py.config.loader import PACKAGE_CONF
from gobblin_py.config.model import JobSpec
from gobblin_py.errors import JobError, spark_failure
from gobblin_py.fs import Location
from gobblin_py.runtime.executors.base import (
    ProgressCallback,
    SessionSource,
    in_driver_why,
    local_cores,
    plan_held_bytes,
    small_plan_bytes,
)
from gobblin_py.runtime.executors.class_archive import java_options
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.interrupt import raise_if_interrupted
from gobblin_py.runtime.task.attempt import run_task
from gobblin_py.runtime.task.results import TasksCancelled, TaskStatus, WorkUnitResult
from gobblin_py.runtime.task.spec import TaskSpec

log = logging.getLogger(__name__)

_LOG4J = PACKAGE_CONF / "log4j2.properties"


def _python_path(job: JobSpec) -> str:
    """The job file's directory and the working directory, so user plugins import on executors."""
    extra = [str(Path(job.source_file).parent), os.getcwd()]
    current = os.environ.get("PYTHONPATH")
    return os.pathsep.join(extra + ([current] if current else []))


class SparkExecutor:
    """Tasks as a Spark job on `spark.master`; Spark's logging stays quiet unless verbose."""

    def __init__(self, job: JobSpec, verbose: bool = False, announce: Callable[[str], None] | None = None) -> None:
        self.job = job
        self.verbose = verbose
        self.announce = announce  # told "starting Spark (master)…" as Spark starts: the seconds that follow are its
        self._session: Any = None
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self.master = job.spark.master
        self.startup_s = 0.0  # time the driver waited for Spark to come up
        self._paths_checked = False
        self._said_in_driver = False
        self._used = False  # a run's tasks (or commits) ran on the session: a warm one takes small plans too

    def start(self) -> None:
        if self._thread is None:
            if self.announce is not None:
                self.announce(f"starting Spark ({self.master})…")
            self._thread = threading.Thread(target=self._start, name="spark-start", daemon=True)
            self._thread.start()

    def _start(self) -> None:
        try:
            self._session = self._build()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the driver thread by session()
            self._error = exc

    def _build(self) -> Any:
        from pyspark import SparkConf
        from pyspark.sql import SparkSession

        spark = self.job.spark
        os.environ["PYSPARK_PYTHON"] = os.environ.get("PYSPARK_PYTHON", sys.executable)
        os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
        pythonpath = _python_path(self.job)
        os.environ["PYTHONPATH"] = pythonpath
        conf = SparkConf().setMaster(spark.master).setAppName(spark.app_name or f"gobblin-py:{self.job.name}")
        for key, value in spark.conf.items():
            conf.set(key, str(value).lower() if isinstance(value, bool) else str(value))
        conf.set("spark.executorEnv.PYTHONPATH", pythonpath)
        if not conf.contains("spark.driver.extraJavaOptions"):
            # the driver JVM only coordinates: C1 JIT and serial GC start it ~1 s sooner
            options = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]
            if spark.class_archive:
                import pyspark

                options += java_options(pyspark.__version__)
            if not self.verbose and _LOG4J.is_file():
                options.append(f"-Dlog4j2.configurationFile=file:{_LOG4J}")
            conf.set("spark.driver.extraJavaOptions", " ".join(options))
        if not self.verbose:
            self._launch_quietly(conf)
        session = SparkSession.builder.config(conf=conf).getOrCreate()
        session.sparkContext.setLogLevel("INFO" if self.verbose else self.job.logging.spark_level)
        return session

    @property
    def log_path(self) -> Path:
        """Where the Spark JVM's own output of the job's last run goes unless --verbose (its start-up banners,
        warnings, an executor's Java stack trace): the run's terminal shows only gobblin-py's lines."""
        return self.job.job.work_dir / "logs" / self.job.name / "spark.log"

    def _launch_quietly(self, conf: Any) -> None:
        """Start the JVM (as pyspark would) with its stdout and stderr in `log_path`; a JVM that cannot start
        is reported with the end of that log."""
        from pyspark import SparkContext
        from pyspark.java_gateway import launch_gateway

        if SparkContext._gateway is not None:  # a JVM already runs in this process (tests share one)
            return
        path = self.log_path
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as out:
            try:
                gateway = launch_gateway(conf, popen_kwargs={"stdout": out, "stderr": out})
            except Exception as exc:  # noqa: BLE001 - Spark's own message is in its log
                tail = path.read_bytes()[-1500:].decode("utf-8", "replace").strip()
                raise JobError(f"Spark's JVM did not start ({exc}); the end of {path}:\n{tail}") from None
        SparkContext._gateway = gateway
        SparkContext._jvm = gateway.jvm

    def start_early(self) -> None:
        """Start Spark in the background while the driver recovers and plans, for a run likely to need it (the
        job's last run did); a plan that turns out small still runs in the driver, and the session is stopped unused."""
        if self._thread is None:
            log.debug("starting Spark while recovering and planning (the last run ran on Spark)")
            self.start()

    def session(self) -> Any:
        self._used = True
        waited = time.monotonic()
        self.start()
        assert self._thread is not None
        self._thread.join()
        self.startup_s += time.monotonic() - waited
        if self._error is not None:
            raise JobError(f"Spark could not start on master {self.job.spark.master!r}: {self._error}")
        return self._session

    def commit_tasks(self, start: bool = False) -> CommitTasks | None:
        """Spark tasks for commits and recoveries: on the running session, or on one started now (`start`)."""
        if not self._used and not start:
            return None  # not on a session started early for tasks that then ran in the driver
        try:
            sc = self.session().sparkContext
            self._check_paths_once()  # the executors must see the store and every file it names
        except JobError as exc:
            log.warning("committing in the driver: %s", exc)
            return None
        return SparkTasks(sc)

    def _check_paths_once(self) -> None:
        if not self._paths_checked:
            self.check_paths()
            self._paths_checked = True

    def check_paths(self) -> None:
        """On a cluster, refuse a job whose paths the executors cannot see (not on a shared filesystem)."""
        sc = self.session().sparkContext
        if sc.master.startswith("local"):
            return
        paths = sorted({str(p) for p in job_paths(self.job)})
        slots = max(1, sc.defaultParallelism)

        def missing(_: Any) -> list[tuple[str, str]]:
            import os
            import socket
            return [(socket.gethostname(), p) for p in paths if not os.path.exists(p)]

        lost = sorted(set(sc.parallelize(range(slots), slots).flatMap(missing).collect()))
        if lost:
            shown = "; ".join(f"{p} (on {host})" for host, p in lost[:5])
            raise JobError(f"executors of {sc.master} cannot see {len(lost)} path(s) of the job: {shown}. Put the job's "
                           "input, schema, work_dir and final_dir on a filesystem every executor mounts at the same path, "
                           "or give task_output_dir and final_dir as URLs (hdfs://, s3://)")

    def run(self, tasks: list[TaskSpec], progress: ProgressCallback | None = None) -> list[WorkUnitResult]:
        """The tasks as one Spark job; a small plan (`spark.in_driver_below`) before Spark was ever asked to start runs
        in the driver instead, and Spark never starts."""
        limit = self.job.spark.in_driver_limit
        cores = local_cores(str(self.master), os.cpu_count() or 1)
        held = plan_held_bytes([t.estimated_bytes for t in tasks], [t.native_share for t in tasks], cores)
        small = small_plan_bytes([held], limit) if not self._used else None
        if small is not None and limit is not None:
            first, self._said_in_driver = not self._said_in_driver, True  # said once, not at every checkpoint
            total = sum(t.estimated_bytes or 0.0 for t in tasks)
            threads = min(len(tasks), cores)
            log.log(logging.INFO if first else logging.DEBUG, "running %d task(s) in the driver, not on Spark%s: %s",
                    len(tasks), f", {threads} at a time" if threads > 1 else "", in_driver_why(small, limit, total))
            return InProcessExecutor(threads=threads).run(tasks, progress)
        sc = self.session().sparkContext
        self._check_paths_once()
        group = f"gobblin-py-{self.job.name}-{time.monotonic_ns()}"
        sc.setJobGroup(group, f"{self.job.name}: {len(tasks)} tasks")
        watcher = _StatusWatcher(sc, group, len(tasks), progress) if progress else None
        finished = False
        try:
            results = sc.parallelize(tasks, len(tasks)).flatMap(run_task).collect()
            finished = True
            return results
        except KeyboardInterrupt:
            _cancelled(sc, group, force=True)
            raise TasksCancelled([]) from None  # the finished tasks' results never reached the driver
        except Exception as exc:  # noqa: BLE001 - a lost executor or a crashed worker fails the Spark job
            if _cancelled(sc, group):
                raise TasksCancelled([]) from None
            finished = True
            message = spark_failure(exc)
            log.error("the Spark job failed: %s", message)
            return [WorkUnitResult(workunit=wu, status=TaskStatus.FAILED, attempts=1, error=f"Spark job failed: {message}")
                    for t in tasks for wu in t.workunits]
        finally:
            if watcher is not None:
                watcher.stop(finished)

    def stop(self, exiting: bool = False) -> None:
        """`exiting` (a command about to end, on a local master, not verbose): do not wait ~1 s for
        SparkContext.stop; the JVM exits when its stdin closes with this process and stops the context in its own
        shutdown hooks. A cluster's application is always stopped, so its master records it as finished."""
        quick = exiting and not self.verbose and str(self.master).startswith("local")
        if self._thread is not None:
            if quick and not self._used:
                return  # started early and never needed: its JVM ends with this process, not waited for
            self._thread.join()
        if self._session is not None:
            if not quick:
                self._session.stop()
            self._session = None


def job_paths(job: JobSpec) -> list[Path]:
    """Every filesystem path the job's settings name (work_dir, inputs, schemas, output directories)."""
    found: list[Path] = [job.job.work_dir, *([job.job.task_output_root.path] if job.job.task_output_root.is_local else [])]

    def walk(value: Any) -> None:
        if isinstance(value, Path):
            found.append(value)
        elif isinstance(value, Location):  # URLs (s3://, hdfs://) are the same for every host
            if value.is_local:
                found.append(value.path)
        elif hasattr(value, "model_fields"):
            for name in type(value).model_fields:
                walk(getattr(value, name))
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)

    plugins = [job.source, *job.converters, *(p.plugin for p in job.row_policies), job.fork]
    for b in job.branches:
        plugins += [*b.converters, *(p.plugin for p in b.row_policies), *(p.plugin for p in b.task_policies), b.writer, b.publisher]
    for plugin in plugins:
        walk(plugin.settings)
    # an output directory need not exist yet: its nearest existing parent must be visible
    return [p if p.exists() else next((a for a in p.parents if a.exists()), p) for p in found]


class _StatusWatcher:
    """Polls Spark's status tracker while the job runs and reports task counts."""

    def __init__(self, sc: Any, group: str, total: int, progress: ProgressCallback, every_s: float = 0.5) -> None:
        self.sc, self.group, self.total, self.progress, self.every_s = sc, group, total, progress, every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="spark-status", daemon=True)
        self._thread.start()

    def _counts(self) -> tuple[int, int, int]:
        tracker = self.sc.statusTracker()
        done = running = failed = 0
        for job_id in tracker.getJobIdsForGroup(self.group):
            job = tracker.getJobInfo(job_id)
            for stage_id in (job.stageIds if job else []):
                stage = tracker.getStageInfo(stage_id)
                if stage:
                    done += stage.numCompletedTasks
                    running += stage.numActiveTasks
                    failed += stage.numFailedTasks
        return done, running, failed

    def _run(self) -> None:
        last = None
        while not self._stop.wait(self.every_s):
            counts = self._counts()
            if counts != last:
                self.progress(*counts, self.total)
                last = counts

    def stop(self, finished: bool) -> None:
        """Stop polling; the bar shows every task done only when the Spark job did end (not when it was cancelled)."""
        self._stop.set()
        self._thread.join()
        if finished:
            self.progress(self.total, 0, 0, self.total)


class SparkTasks:
    """Commit and recovery groups as Spark tasks on the executors, one task per group."""

    def __init__(self, sc: Any) -> None:
        self.sc, self.master, self.slots = sc, sc.master, max(1, sc.defaultParallelism)

    def flat_map(self, fn: Any, groups: list[Any]) -> list[Any]:
        return self.sc.parallelize(groups, len(groups)).flatMap(fn).collect()


class SharedSparkExecutor(SparkExecutor):
    """Runs on a SparkSession the runner does not own, and never stops it: `session` (tests share one across many
    jobs), or the scheduler's `warm` one, asked for only when the run has tasks."""

    def __init__(self, job: JobSpec, session: Any = None, *, warm: SessionSource | None = None) -> None:
        super().__init__(job)
        self.warm = warm
        self._session = session if session is not None else warm.running() if warm is not None else None
        if self._session is not None:
            self.master = self._session.sparkContext.master
            self._used = True  # a session already up takes every plan, small ones too

    def start(self) -> None:
        pass

    def session(self) -> Any:
        self._used = True
        if self._session is None:
            if self.warm is None:
                raise JobError("SharedSparkExecutor was given neither a session nor a warm session to start")
            self._session, self.startup_s = self.warm.get(self.job)
            self.master = self._session.sparkContext.master
        return self._session

    def stop(self, exiting: bool = False) -> None:
        pass


def _cancelled(sc: Any, group: str, force: bool = False) -> bool:
    """After Ctrl-C (seen directly, or swallowed by py4j): cancel the job's tasks and say so."""
    try:
        raise_if_interrupted()
    except KeyboardInterrupt:
        force = True
    if force:
        try:
            sc.cancelJobGroup(group)
        except Exception:  # noqa: BLE001 - the JVM may be going away too; the run is cancelled either way
            pass
    return force
