"""What a command holds while it may commit for a job: the host's job lock, then the job's lease with its fencing epoch.

The lock (fcntl on the work directory) turns away a second run on the same work directory at once, and is released by
the kernel when its holder dies. The lease (`state.lease`) keeps apart drivers that share only the lease's location,
such as two hosts, a retried pod, or a driver paused past the lease's TTL; every commit step checks it first through
the store's fence. With `job.lease.url` or `job.work_store` set the lease alone decides (no lock): the work directory is
then an object store, or a mount that several hosts share, where a lock would either not hold across hosts or outlive a
paused holder.
"""

from __future__ import annotations

import logging
from types import TracebackType

from gobblin_py.commit.store import CommitStepStore
from gobblin_py.config.model import JobSpec
from gobblin_py.state.lease import Lease, Owner
from gobblin_py.state.lock import JobLock

log = logging.getLogger(__name__)


class JobGuard:
    """Context manager: the job lock, then the lease (both only when `job.lock` is on); `stores` get the lease's fence
    while it is held."""

    def __init__(self, job: JobSpec, run_id: str, *stores: CommitStepStore, force_takeover: bool = False) -> None:
        self.job, self.run_id, self.stores, self.force = job, run_id, stores, force_takeover
        # with a lease URL the lease alone decides: a lock on a shared mount would keep a paused driver's hold
        self._lock = JobLock(job.job.work_dir, job.name, job.job.lock and not job.job.shared_lease)
        self.lease: Lease | None = None

    def __enter__(self) -> JobGuard:
        self._lock.__enter__()
        settings = self.job.job
        if not settings.lock:
            return self
        try:
            self.lease = Lease.acquire(settings.lease_location, self.job.name, Owner.here(self.run_id, settings.records_root),
                                       settings.lease.ttl, force=self.force, filesystems=settings.filesystems)
        except OSError as exc:
            if settings.shared_lease:
                self._lock.__exit__(None, None, None)
                raise
            # the lease in the work directory: the lock just taken keeps its drivers apart, so a full or read-only
            # disk does not stop a recovery (which frees space); its commits carry no epoch
            log.warning("job %s: the lease in %s could not be written (%s); this run holds the work directory's lock "
                        "alone", self.job.name, settings.lease_location, exc)
            return self
        except BaseException:
            self._lock.__exit__(None, None, None)
            raise
        self.lease.start_renewing()
        for store in self.stores:
            store.fence = self.lease.fence
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        try:
            if self.lease is not None:
                for store in self.stores:
                    store.fence = None
                self.lease.release()
        finally:
            self._lock.__exit__(exc_type, exc, tb)
