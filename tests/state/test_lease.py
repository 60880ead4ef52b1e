"""The job's lease (gobblin_py/state/lease.py, issue 43) on both kinds of location, a local directory and an object store
(moto's S3 server, which enforces If-None-Match and If-Match): the same protocol tests run on each."""

from __future__ import annotations

import pickle
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from gobblin_py.errors import ConfigError, LeaseHeldError, LeaseLostError
from gobblin_py.fs.conditional import Conflict, ObjectBlobs, check_enforced, open_blobs
from gobblin_py.state.lease import Lease, Owner, read_lease


@pytest.fixture(params=["local", "s3"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, Any]]:
    """A lease location and its filesystems options: a directory, or a fresh bucket on moto."""
    if request.param == "local":
        return str(tmp_path / "leases"), {}
    pytest.importorskip("obstore")
    s3 = request.getfixturevalue("s3")
    return f"s3://{s3.new_bucket()}/leases", s3.options


def owner(run: str) -> Owner:
    return Owner("host-" + run, 999_999, run, "/w/" + run)  # no such pid here: never "dead here" (another host)


def test_a_live_lease_turns_a_second_driver_away_naming_the_holder(where: tuple[str, dict]) -> None:
    location, fs = where
    first = Lease.acquire(location, "j", owner("a"), 60, filesystems=fs)
    assert first.epoch == 1
    with pytest.raises(LeaseHeldError) as refused:
        Lease.acquire(location, "j", owner("b"), 60, filesystems=fs)
    assert "run a (pid 999999 on host-a" in str(refused.value) and "--force-takeover" in str(refused.value)
    first.release()
    second = Lease.acquire(location, "j", owner("b"), 60, filesystems=fs)
    assert second.epoch == 2 and read_lease(open_blobs(location, fs), "j").owner.run_id == "b"


def test_an_expired_lease_is_taken_at_the_next_epoch_and_its_old_holder_commits_nothing(where: tuple[str, dict]) -> None:
    location, fs = where
    old = Lease.acquire(location, "j", owner("a"), 1, filesystems=fs)
    fence = old.fence
    fence.check()  # held: passes
    time.sleep(1.2)  # paused past its TTL
    with pytest.raises(LeaseLostError, match="expired before this commit step"):
        fence.check()
    new = Lease.acquire(location, "j", owner("b"), 60, filesystems=fs)
    assert new.epoch == 2 and new.taken_from is not None and new.taken_from.owner.run_id == "a"
    with pytest.raises(LeaseLostError, match=r"lost the lease .* to epoch 2, run b"):
        fence.check()
    with pytest.raises(LeaseLostError, match="lost its lease"):
        old.renew()  # its compare-and-swap fails: the version it holds is stale
    old.release()  # a lost lease is not released over the new holder's
    assert read_lease(open_blobs(location, fs), "j").owner.run_id == "b"
    new.fence.check()


def test_force_takeover_takes_a_live_lease(where: tuple[str, dict]) -> None:
    location, fs = where
    Lease.acquire(location, "j", owner("a"), 60, filesystems=fs)
    taken = Lease.acquire(location, "j", owner("b"), 60, force=True, filesystems=fs)
    assert taken.epoch == 2 and taken.taken_from is not None and not taken.taken_from.released


def test_renewal_keeps_the_lease_past_its_ttl(where: tuple[str, dict]) -> None:
    location, fs = where
    with Lease.acquire(location, "j", owner("a"), 1.5, filesystems=fs) as lease:
        time.sleep(2.5)  # renewed every 0.5 s
        lease.fence.check()
        with pytest.raises(LeaseHeldError):
            Lease.acquire(location, "j", owner("b"), 60, filesystems=fs)
    assert read_lease(open_blobs(location, fs), "j").released


def test_drivers_racing_for_one_lease_get_one_epoch_each_and_one_winner(where: tuple[str, dict]) -> None:
    location, fs = where
    won: list[int] = []
    lost: list[str] = []

    def take(i: int) -> None:
        try:
            won.append(Lease.acquire(location, "j", owner(f"r{i}"), 60, filesystems=fs).epoch)
        except LeaseHeldError as exc:
            lost.append(str(exc))

    threads = [threading.Thread(target=take, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert won == [1] and len(lost) == 5


def test_a_killed_holder_on_this_host_is_taken_over_at_once(where: tuple[str, dict]) -> None:
    location, fs = where
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    import socket

    dead = Owner(socket.gethostname(), int(child.stdout), "killed", "/w")
    Lease.acquire(location, "j", dead, 60, filesystems=fs)
    assert Lease.acquire(location, "j", owner("b"), 60, filesystems=fs).epoch == 2


def test_the_fence_travels_to_another_process(where: tuple[str, dict], tmp_path: Path) -> None:
    """An executor checks the fence it was sent: it passes while the lease is held, and fails once it is taken over."""
    location, fs = where
    lease = Lease.acquire(location, "j", owner("a"), 60, filesystems=fs)
    blob = tmp_path / "fence.pickle"
    blob.write_bytes(pickle.dumps(lease.fence))
    check = [sys.executable, "-c", "import pickle, sys; pickle.loads(open(sys.argv[1], 'rb').read()).check()", str(blob)]
    assert subprocess.run(check, capture_output=True, text=True).returncode == 0
    Lease.acquire(location, "j", owner("b"), 60, force=True, filesystems=fs)
    done = subprocess.run(check, capture_output=True, text=True)
    assert done.returncode == 1 and "LeaseLostError" in done.stderr and "epoch 2, run b" in done.stderr


def test_an_unreadable_lease_stops_every_driver_naming_the_file(where: tuple[str, dict]) -> None:
    location, fs = where
    blobs = open_blobs(location, fs)
    blobs.create("j/lease.json", b"{not json")
    from gobblin_py.errors import StateStoreError

    with pytest.raises(StateStoreError, match=r"lease file .*j/(\.lease\.json\.versions|lease\.json) is unreadable.*deleting it"):
        Lease.acquire(location, "j", owner("a"), 60, filesystems=fs)


def test_a_store_that_ignores_conditional_writes_is_refused(s3: Any) -> None:
    """A store accepting a second create-if-absent of one key (an old MinIO, a proxy dropping the header) cannot keep
    two drivers apart: refused before any lease is taken, naming the store."""
    pytest.importorskip("obstore")

    class Ignoring(ObjectBlobs):
        def create(self, key: str, data: bytes) -> str:
            return self._put(key, data, "overwrite")  # what such a store does with If-None-Match

    store = Ignoring(f"s3://{s3.new_bucket()}/leases", s3.options["s3"])
    with pytest.raises(ConfigError, match="does not enforce conditional writes"):
        check_enforced(store)
    check_enforced(ObjectBlobs(f"s3://{s3.new_bucket()}/leases", s3.options["s3"]))  # moto enforces: passes


def test_a_lost_swap_is_a_conflict_on_both_kinds(where: tuple[str, dict]) -> None:
    location, fs = where
    blobs = open_blobs(location, fs)
    v1 = blobs.create("k", b"1")
    with pytest.raises(Conflict):
        blobs.create("k", b"2")
    v2 = blobs.swap("k", b"3", v1)
    with pytest.raises(Conflict):
        blobs.swap("k", b"4", v1)
    assert blobs.get("k").data == b"3" and blobs.get("k").version == v2
