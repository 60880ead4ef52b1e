"""The work directory's identity: a random id made on its first run and kept in `<work_dir>/identity.json`, so a target
can tell the work directory that publishes to it from another one (another host's, or one made afresh)."""

from __future__ import annotations

import datetime as dt
import json
import socket
import uuid
from pathlib import Path

from gobblin_py.api import Claimant
from gobblin_py.durable import atomic_replace, fsync_dir
from gobblin_py.errors import StateStoreError

FILE = "identity.json"


def claimant(work_dir: Path) -> Claimant:
    """This work directory as a claimant, its id made (create-if-absent, durably) on first use."""
    path = Path(work_dir) / FILE
    if not path.exists():
        body = json.dumps({"id": uuid.uuid4().hex, "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                           "host": socket.gethostname(), "path": str(work_dir)}).encode()
        try:
            atomic_replace(path, lambda f: f.write(body), replace=False, mode=0o644)
            fsync_dir(path.parent)
        except FileExistsError:
            pass  # another process made it first: its id is the directory's
    try:
        found = json.loads(path.read_text())["id"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StateStoreError(f"{path}, the work directory's identity, is unreadable ({exc}); restore it from a backup "
                              "(a new one makes every publisher's target refuse this directory as another's)") from None
    return Claimant(work_dir_id=str(found), work_dir=str(work_dir), host=socket.gethostname())
