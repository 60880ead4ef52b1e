"""The exception tree of gobblin-py, grouped by what the runner does next.

Every error is picklable (it crosses Spark's executor/driver boundary) and its message
names the file, key, dataset or record at fault and says what to do.
"""

from __future__ import annotations

import errno
import re


class GobblinError(Exception):
    """Root of every error gobblin-py raises on purpose."""

    exit_code: int = 1
    environmental: bool = False
    """A fault of the machine or of a service, that the operator fixes or that clears by itself (see `is_environment_fault`)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __reduce__(self):  # keep subclasses picklable whatever their __init__ takes
        return (_rebuild, (type(self), self.message, self.__dict__))

    def __str__(self) -> str:
        return self.message


def _rebuild(cls: type[GobblinError], message: str, state: dict) -> GobblinError:
    err = cls.__new__(cls)
    Exception.__init__(err, message)
    err.__dict__.update(state)
    return err


# --- fatal before any work: the user must fix the input -------------------------------


class ConfigError(GobblinError):
    """The job file or the command line is wrong; nothing has run."""

    exit_code = 2


class PluginNotFoundError(ConfigError):
    """A `class:` names no built-in alias and no importable class."""


# --- the job ran and failed --------------------------------------------------------------


class JobError(GobblinError):
    """The job ran and did not complete; state shows what was committed."""

    exit_code = 1


class JobLockedError(JobError):
    """Another run of the same job holds the lock."""


class LeaseHeldError(JobLockedError):
    """Another driver, perhaps on another host, holds the job's lease."""


class TaskError(JobError):
    """A task failed; retried up to `job.max_task_retries` times."""


class RetriableTaskError(TaskError):
    """A task failure worth retrying (source unavailable, transient IO)."""


class PermanentTaskError(TaskError):
    """A task failure every attempt would repeat until a person acts (a setting to change, a schema to register): the
    task fails at once, not retried, as a bad configuration inside a task does; the message says what to do."""


class UnreachableError(RetriableTaskError):
    """A service a task reads from (a Kafka broker …) cannot be reached. Retried, but with one retry budget per
    run for one service: once a task of the run gives up on `endpoint`, the run's other tasks that need it fail
    at once (see `gobblin_py.runtime.task.giveups`). `remedy` says what the operator should check."""

    environmental = True

    def __init__(self, message: str, endpoint: str, remedy: str) -> None:
        super().__init__(message)
        self.endpoint = endpoint  # as messages name it: "Kafka broker 127.0.0.1:9092"
        self.remedy = remedy


class SourceError(JobError):
    """The Source could not plan or read (unreachable broker, missing directory)."""


class RecordError(GobblinError):
    """One record is bad; the task goes on. Raise it from any plugin hook that handles one record.

    A converter's `convert_record`/`map_record`, a row policy's `check`, a fork's `route` or a
    writer's `write` raises `RecordError("field 'ts': 9e18 is not a timestamp", field="ts")` for a
    record that can never be processed: under `quality.bad_records: ERR_FILE` (the default) the
    record goes to the task's error file with its location, the stage and this message, and the
    task's other records are published; under `FAIL` the task fails, and is not retried.
    Any other exception one record raises there is a bad record too (see `is_record_fault`);
    raise `TaskError` (or let `OSError` through) when the task itself is broken. An extractor
    reports an unreadable record through `context.reject` and reads on.
    """

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class QualityError(TaskError):
    """A MANDATORY (FAIL) quality policy rejected a record or the task output."""


# --- commit layer ------------------------------------------------------------------------


class CommitError(JobError):
    """A commit step could not be verified or executed; the sequence stays pending."""


class LeaseLostError(CommitError):
    """This driver's lease was taken over, released or expired: it commits nothing more (a paused driver that woke);
    its commit records are left as they are, for the lease's holder or the next run to recover."""


class CatalogUnavailableError(CommitError):
    """A table catalog (an Iceberg catalog's database or service) cannot be reached or refuses access: the commit stays
    pending and is retried after `job.commit_retry_backoff`, as other faults of the environment are."""

    environmental = True


class CorruptCommitRecordError(CommitError):
    """A commit store record is torn, has a bad checksum or an unknown version."""


class StateStoreError(JobError):
    """The state store holds something unreadable."""


class FileSystemError(JobError):
    """An operation on a filesystem (an S3 bucket, HDFS …) failed; the message names the operation and URL."""

    environmental = True


# --- what the runner does next -----------------------------------------------------------

_NOT_ONE_RECORD = (OSError, MemoryError, ImportError, NotImplementedError, GobblinError)


def is_record_fault(exc: BaseException) -> bool:
    """True when `exc`, raised while one record was converted, checked, routed, partitioned or written, is
    that record's fault: the record goes to the error file and the task goes on.

    That is a RecordError, or any other Exception (ValueError, KeyError, TypeError, OverflowError,
    UnicodeError …: the record's values break the plugin), except what says the task itself cannot go
    on: OSError (a disk, a network, a store), MemoryError, ImportError, NotImplementedError and our own
    errors (TaskError, QualityError, ConfigError …). Those fail the task, as does anything not an
    Exception (KeyboardInterrupt, SystemExit).
    """
    if isinstance(exc, RecordError):
        return True
    return isinstance(exc, Exception) and not isinstance(exc, _NOT_ONE_RECORD)


ENVIRONMENT_ERRNOS = frozenset({
    errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS, errno.EACCES, errno.EPERM, errno.EMFILE,
    errno.ENFILE, errno.ENOMEM, errno.ESTALE, errno.EAGAIN, errno.ETIMEDOUT, errno.ECONNREFUSED, errno.ECONNRESET,
    errno.ECONNABORTED, errno.EHOSTUNREACH, errno.ENETUNREACH, errno.ENETDOWN, errno.ENOTCONN,
})
"""What an OSError says when the machine is at fault: a disk full, read-only or failing, a permission, a limit, a network."""


def is_environment_fault(exc: BaseException) -> bool:
    """True when `exc`, or what caused it, is a fault of the machine or a service that the operator fixes or that clears
    by itself (a full, read-only or failing disk, a permission, an unreachable service or catalog): a commit failing so
    is retried after `job.commit_retry_backoff`, even once quarantined. Anything else (a foreign file in the way, a lost
    input, a table another writer changed) waits for a person."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if getattr(current, "environmental", False) or isinstance(current, (ConnectionError, TimeoutError)):
            return True
        if isinstance(current, OSError) and current.errno in ENVIRONMENT_ERRNOS:
            return True
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    return False


def os_fault(exc: OSError) -> str:
    """An OSError in one line that names what failed and where: `No space left on device: /work/state/t/runs.json`."""
    where = ", ".join(str(f) for f in (exc.filename, exc.filename2) if f is not None)
    what = exc.strerror or describe(exc)
    return f"{what}: {where}" if where else what


def is_retriable(exc: BaseException) -> bool:
    """False when a failed task attempt would fail the same way again: a bad record under `FAIL`, a FAIL
    quality policy, a bad configuration, a `PermanentTaskError`. Anything else (IO, a lost connection, a plugin's own
    failure) is retried."""
    return not isinstance(exc, (RecordError, QualityError, ConfigError, PermanentTaskError))


def describe(exc: BaseException) -> str:
    """`TypeName: message` for a library's exception, once (kafka-python's errors already start with their name)."""
    text, name = str(exc), type(exc).__name__
    return text if text.startswith(name) else f"{name}: {text}" if text else name


def spark_failure(exc: BaseException) -> str:
    """What failed a Spark job, in one line: Py4J's message starts with a generic line and buries the cause."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    python = [line for line in lines if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt): ", line)
                                          and not line.startswith(("org.", "java.", "scala."))]
    if python:
        return python[-1]
    aborted = next((line for line in lines if "Job aborted" in line), None)
    if aborted is not None:
        return aborted.rsplit("Exception: ", 1)[-1].split(". Consider", 1)[0]
    return lines[0] if lines else type(exc).__name__


def scrub(text: str, secret: str | None) -> str:
    """`text` with `secret` cut out, as written and as a URL carries it (percent-quoted: a driver's error may repeat
    the connection URL it was given), whatever a library put in it."""
    if not secret:
        return text
    from urllib.parse import quote

    return text.replace(secret, "***").replace(quote(secret, safe=""), "***")
