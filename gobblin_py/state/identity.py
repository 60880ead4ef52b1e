"""The work directory's identity: a random id made on its first run and kept in `<work_dir>/identity.json`, so a target
can tell the work directory that publishes to it from another one (another host's, or one made afresh)."""

from __future__ import annotations

import datetime as dt
import json
import socket
import uuid
from pathlib import Path

from gobblin_py.api import Claimant
from gobblin_py.errors import StateStoreError
from gobblin_py.fs.conditional import Conflict
from gobblin_py.fs.records import record_files

FILE = "identity.json"


def claimant(work_dir: str | Path) -> Claimant:
    """This work directory as a claimant, its id made (create-if-absent, durably) on first use."""
    files = record_files(work_dir)
    where = files.locate(FILE)
    try:
        found = files.get(FILE)
        if found is None:
            body = json.dumps({"id": uuid.uuid4().hex, "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                               "host": socket.gethostname(), "path": str(work_dir)}).encode()
            try:
                files.create(FILE, body)
            except Conflict:
                pass  # another process made it first: its id is the directory's
            found = files.get(FILE)
        if found is None:
            raise StateStoreError("it is gone right after it was made")
        value = json.loads(found.data)["id"]
    except (OSError, ValueError, KeyError, TypeError, StateStoreError) as exc:
        raise StateStoreError(f"{where}, the work directory's identity, is unreadable ({exc}); restore it from a backup "
                              "(a new one makes every publisher's target refuse this directory as another's)") from None
    return Claimant(work_dir_id=str(value), work_dir=str(work_dir), host=socket.gethostname())
