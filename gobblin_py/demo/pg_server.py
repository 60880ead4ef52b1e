"""A real PostgreSQL 16 (the binaries of the `pgserver` wheel, the `demo` extra) on a free 127.0.0.1 port, with
password authentication: `gobblin-py demo postgres`, and the JDBC source's tests and benchmark. As root it runs as the
unprivileged `pgserver` user (PostgreSQL refuses to run as root).

Our own start-up rather than `pgserver.get_server`: that one listens on a Unix socket with trust authentication,
and the JDBC source connects over TCP with a password, as it does to a real server."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from gobblin_py.demo.broker import free_port
from gobblin_py.errors import ConfigError

__all__ = ["PASSWORD", "USER", "LocalPostgres", "free_port"]

USER = "gobblin"
PASSWORD = "s3cret-pw-not-in-messages"


class LocalPostgres:
    """`with LocalPostgres() as pg:` a started server; `pg.url(db)` without the password, `pg.connect(db)`.
    `settings` are extra server settings (`-c name=value`), after ours: `{"wal_level": "logical"}` for logical decoding."""

    def __init__(self, settings: dict[str, str | int] | None = None, data_dir: Path | None = None) -> None:
        self.settings = dict(settings or {})
        import warnings

        with warnings.catch_warnings():  # platformdirs warns of an unset XDG_RUNTIME_DIR (a container): not ours to say
            warnings.simplefilter("ignore")
            from pgserver._commands import POSTGRES_BIN_PATH

        self.bin = Path(POSTGRES_BIN_PATH)
        self.port = free_port()
        self.host = "127.0.0.1"
        self.run_as: dict[str, Any] = {}
        entry = None
        if os.geteuid() == 0:  # checked before anything is made: initdb's own "Permission denied" names no fix
            from pgserver.utils import ensure_user_exists

            entry = ensure_user_exists("pgserver")
            closed = _closed_to(self.bin / "initdb", entry.pw_uid, entry.pw_gid)
            if closed is not None:
                raise ConfigError(f"as root, PostgreSQL runs as the user pgserver, which cannot enter {closed} (mode "
                                  f"{closed.stat().st_mode & 0o777:o}) on the way to its programs in {self.bin}: "
                                  f"chmod o+x {closed} (entering only, not listing), or install gobblin-py in a "
                                  "virtualenv every user can enter, or run as another user")
        self.dir = Path(tempfile.mkdtemp(prefix="gobblin-pg-", dir=data_dir))
        self.data = self.dir / "data"
        if entry is not None:
            os.chown(self.dir, entry.pw_uid, entry.pw_gid)
            closed = _closed_to(self.dir, entry.pw_uid, entry.pw_gid)
            if closed is not None:
                shutil.rmtree(self.dir, ignore_errors=True)
                raise ConfigError(f"as root, PostgreSQL runs as the user pgserver, which cannot enter {closed} (mode "
                                  f"{closed.stat().st_mode & 0o777:o}) on the way to its data directory {self.dir}: "
                                  f"chmod o+x {closed} (entering only, not listing), or --data-dir DIR in a directory "
                                  "every user can enter (--data-dir /tmp), or run as another user")
            self.run_as = {"user": entry.pw_uid, "group": entry.pw_gid}

    def _run(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.bin / args[0]), *args[1:]], check=True, capture_output=True, text=True,
                              cwd=self.dir, **self.run_as, **kwargs)

    def start(self) -> LocalPostgres:
        pwfile = self.dir / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if self.run_as:
            os.chown(pwfile, self.run_as["user"], self.run_as["group"])
        self._run("initdb", "-D", str(self.data), "-U", USER, "--pwfile", str(pwfile), "--auth", "scram-sha-256",
                  "-E", "UTF8", "--locale", "C")
        pwfile.unlink()
        options = f"-p {self.port} -h {self.host} -k '' -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        options += "".join(f" -c {name}={value}" for name, value in self.settings.items())
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.dir / "log"), "-w", "-t", "60", "start")
        deadline = time.monotonic() + 30
        while True:
            try:
                self.connect("postgres").close()
                return self
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> LocalPostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def url(self, database: str) -> str:
        """The job file's `url` (no password: that comes from `password_env`)."""
        return f"postgresql://{USER}@{self.host}:{self.port}/{database}"

    def connect(self, database: str, autocommit: bool = True) -> Any:
        import psycopg

        return psycopg.connect(host=self.host, port=self.port, user=USER, password=PASSWORD, dbname=database,
                               autocommit=autocommit)

    def create_database(self, name: str) -> str:
        with self.connect("postgres") as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return name


def _closed_to(path: Path, uid: int, gid: int) -> Path | None:
    """The first directory above `path` that user `uid` (group `gid`) may not enter, or None."""
    for parent in reversed(path.parents):
        st = parent.stat()
        bit = 0o100 if st.st_uid == uid else 0o010 if st.st_gid == gid else 0o001
        if not st.st_mode & bit:
            return parent
    return None
