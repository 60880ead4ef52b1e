"""The job's lease with a fencing epoch: which driver may commit for the job now, across hosts.

`<lease location>/<job>/lease.json` holds the owner (host, pid, run id, work directory), an epoch one above the last
holder's, and an expiry. A run takes it by a conditional write (create-if-absent, or compare-and-swap of the version
it read), renews it by compare-and-swap while it works, and releases it at the end. A driver that finds a live lease
of another is refused, naming the holder; one whose holder released it, let it expire, or is a dead process of this
host takes it over with the next epoch. A takeover makes the old holder's next renewal fail (its version is stale), and
every commit step first checks the lease (`Fence`): epoch still its own, not released, not expired. So a driver that
paused past its lease (SIGSTOP, a long GC, a frozen VM) and wakes does not commit.

Clocks: the expiry is the holder's clock plus the TTL, read against the reader's clock. Takeover by expiry assumes the
hosts' clocks agree within a fraction of the TTL. Mutual exclusion of the lease itself rests on the conditional
writes, not on clocks: two drivers can never both write the same epoch.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gobblin_py.errors import LeaseHeldError, LeaseLostError, StateStoreError
from gobblin_py.fs.conditional import Blobs, Conflict, check_enforced, open_blobs

FORMAT = 1


@dataclass(frozen=True)
class Owner:
    """Who holds (or held) a lease."""

    host: str
    pid: int
    run_id: str
    work_dir: str

    @classmethod
    def here(cls, run_id: str, work_dir: Path | str) -> Owner:
        return cls(socket.gethostname(), os.getpid(), run_id, str(work_dir))

    def describe(self) -> str:
        return f"run {self.run_id} (pid {self.pid} on {self.host}, work_dir {self.work_dir})"

    def dead_here(self) -> bool:
        """A process of this host that is gone (killed): its lease need not wait for the expiry."""
        if self.host != socket.gethostname() or self.pid == os.getpid():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False


@dataclass(frozen=True)
class LeaseRecord:
    """What the lease file says."""

    job: str
    epoch: int
    owner: Owner
    acquired: str
    expires_at: float          # the holder's clock, seconds since the epoch
    ttl_s: float
    released: bool = False
    nonce: str = field(default_factory=lambda: uuid.uuid4().hex)  # no two writes share a version

    def to_bytes(self) -> bytes:
        return json.dumps({"format": FORMAT, **asdict(self)}, sort_keys=True).encode()

    @classmethod
    def parse(cls, data: bytes, where: str) -> LeaseRecord:
        try:
            body = json.loads(data)
            if body.get("format") != FORMAT:
                raise ValueError(f"format {body.get('format')!r}")
            return cls(job=body["job"], epoch=int(body["epoch"]), owner=Owner(**body["owner"]), acquired=body["acquired"],
                       expires_at=float(body["expires_at"]), ttl_s=float(body["ttl_s"]), released=bool(body["released"]),
                       nonce=body["nonce"])
        except (ValueError, KeyError, TypeError) as exc:
            raise StateStoreError(f"lease file {where} is unreadable ({exc}); no run of the job starts until it is "
                                  "repaired or deleted (deleting it lets the next run take the lease at epoch 1)") from None

    def live(self, now: float) -> bool:
        return not self.released and self.expires_at > now

    def to_view(self, now: float) -> dict[str, Any]:
        """What `status --json` and the status page show: the epoch, the owner, the expiry and held/released/expired."""
        return {"epoch": self.epoch, **asdict(self.owner), "acquired": self.acquired,
                "expires_at": dt.datetime.fromtimestamp(self.expires_at, dt.UTC).isoformat(timespec="seconds"),
                "state": "released" if self.released else "held" if self.expires_at > now else "expired"}

    def describe(self, now: float | None = None) -> str:
        now = time.time() if now is None else now
        if self.released:
            state = "released"
        elif self.expires_at > now:
            state = f"held, expires in {self.expires_at - now:.0f} s"
        else:
            state = f"expired {now - self.expires_at:.0f} s ago"
        return f"epoch {self.epoch}, {self.owner.describe()}, {state}"


def lease_key(job: str) -> str:
    return f"{job}/lease.json"


def read_lease(blobs: Blobs, job: str) -> LeaseRecord | None:
    """The job's lease as it stands, None when no run ever took it."""
    got = blobs.get(lease_key(job))
    return None if got is None else LeaseRecord.parse(got.data, blobs.locate(lease_key(job)))


@dataclass(frozen=True)
class Fence:
    """What a commit step checks first, in the driver or on an executor (picklable): the job's lease still has this
    epoch and run, is not released, and has not expired. LeaseLostError otherwise, naming who holds it now."""

    location: str
    filesystems: Mapping[str, Mapping[str, Any]]
    job: str
    epoch: int
    run_id: str

    def check(self) -> None:
        record = read_lease(_blobs(self.location, json.dumps(self.filesystems, sort_keys=True, default=str)), self.job)
        now = time.time()
        if record is None or record.epoch != self.epoch or record.owner.run_id != self.run_id:
            holder = record.describe(now) if record is not None else "no lease at all"
            raise LeaseLostError(f"job {self.job!r}: this driver (run {self.run_id}, epoch {self.epoch}) lost the lease "
                                 f"at {self.location} to {holder}; it commits nothing more. What it left pending is "
                                 "recovered by the lease's holder or the next run")
        if not record.live(now):
            raise LeaseLostError(f"job {self.job!r}: the lease of run {self.run_id} (epoch {self.epoch}) at {self.location} "
                                 f"{'was released' if record.released else 'expired'} before this commit step (paused "
                                 "longer than job.lease.ttl?); it commits nothing more, and the next run recovers what "
                                 "it left pending")


@functools.lru_cache(maxsize=16)
def _blobs(location: str, filesystems: str) -> Blobs:
    """One store client per location in a process (an object store's connection is reused by every check)."""
    return open_blobs(location, json.loads(filesystems))


class Lease:
    """A held lease: renew it while working, release it at the end (a context manager); `fence` for commit steps."""

    def __init__(self, blobs: Blobs, location: str, filesystems: Mapping[str, Mapping[str, Any]], record: LeaseRecord,
                 version: str, taken_from: LeaseRecord | None) -> None:
        self.blobs, self.location, self.filesystems = blobs, location, filesystems
        self.record, self._version, self.taken_from = record, version, taken_from
        self._mutex = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lost: LeaseLostError | None = None

    @property
    def epoch(self) -> int:
        return self.record.epoch

    @property
    def fence(self) -> Fence:
        return Fence(self.location, dict(self.filesystems), self.record.job, self.record.epoch, self.record.owner.run_id)

    @classmethod
    def acquire(cls, location: str | Path, job: str, owner: Owner, ttl_s: float, *, force: bool = False,
                filesystems: Mapping[str, Mapping[str, Any]] | None = None) -> Lease:
        """Take the job's lease at the next epoch; LeaseHeldError while another driver's is live (unless `force`)."""
        blobs = open_blobs(location, filesystems)
        check_enforced(blobs)
        key = lease_key(job)
        for _ in range(5):
            got = blobs.get(key)
            held = None if got is None else LeaseRecord.parse(got.data, blobs.locate(key))
            now = time.time()
            if held is not None and held.live(now) and not force and not held.owner.dead_here():
                raise LeaseHeldError(
                    f"job {job!r} is running elsewhere: its lease at {blobs.where}/{key} is {held.describe(now)}. Wait "
                    "for that run to end; a lease of a host that is gone expires by itself after job.lease.ttl; "
                    "`--force-takeover` takes it now, which is safe only if that driver is surely stopped")
            record = LeaseRecord(job=job, epoch=(held.epoch if held else 0) + 1, owner=owner,
                                 acquired=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                                 expires_at=now + ttl_s, ttl_s=ttl_s)
            try:
                version = blobs.create(key, record.to_bytes()) if got is None else \
                    blobs.swap(key, record.to_bytes(), got.version)
            except Conflict:
                continue  # another driver wrote it meanwhile: read again
            return cls(blobs, str(location), filesystems or {}, record, version, held)
        raise LeaseHeldError(f"job {job!r}: another driver kept taking the lease at {blobs.where}/{key}; try again")

    def renew(self) -> None:
        """Extend the expiry by a compare-and-swap; LeaseLostError when another driver took it meanwhile."""
        with self._mutex:
            if self.lost is not None:
                raise self.lost
            record = dataclasses.replace(self.record, expires_at=time.time() + self.record.ttl_s, nonce=uuid.uuid4().hex)
            try:
                self._version = self.blobs.swap(lease_key(record.job), record.to_bytes(), self._version)
            except Conflict:
                now = read_lease(self.blobs, record.job)
                self.lost = LeaseLostError(
                    f"job {record.job!r}: run {record.owner.run_id} (epoch {record.epoch}) lost its lease at "
                    f"{self.blobs.where} to {now.describe() if now else 'nobody (deleted)'}; it commits nothing more")
                raise self.lost from None
            self.record = record

    def release(self) -> None:
        """Mark the lease released so the next run takes it at once; nothing when it was lost."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._mutex:
            if self.lost is not None:
                return
            record = dataclasses.replace(self.record, released=True, nonce=uuid.uuid4().hex)
            try:
                self._version = self.blobs.swap(lease_key(record.job), record.to_bytes(), self._version)
                self.record = record
            except (Conflict, StateStoreError):
                pass  # taken over, or unreachable: it expires by itself

    def start_renewing(self) -> None:
        """Renew every third of the TTL on a daemon thread until released or lost (a store briefly unreachable is
        retried; the fence refuses commit steps once the expiry passes)."""
        def loop() -> None:
            while not self._stop.wait(self.record.ttl_s / 3):
                try:
                    self.renew()
                except LeaseLostError:
                    return
                except (StateStoreError, OSError):
                    continue

        self._thread = threading.Thread(target=loop, name=f"lease-{self.record.job}", daemon=True)
        self._thread.start()

    def __enter__(self) -> Lease:
        self.start_renewing()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
