"""A real MariaDB (Debian's `mariadb-server` package: `apt-get install mariadb-server`) on a free 127.0.0.1 port,
with its own temporary data directory, for the jdbc source's MySQL tests.

`mariadb-install-db` creates the system tables (root reached through the unix socket only, without a password), the
server starts with grants on, and a `gobblin` user with a password is created over the socket: the tests connect over
TCP as that user, so a wrong password is refused as on a real server. As root the server runs as root (`--user`)."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

USER = "gobblin"
PASSWORD = "my-s3cret-pw-not-in-messages"
INSTALL_HINT = "apt-get install -y --no-install-recommends mariadb-server"


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _find(*names: str) -> str | None:
    for name in names:
        found = shutil.which(name) or next((str(Path(d) / name) for d in ("/usr/sbin", "/usr/bin")
                                            if (Path(d) / name).is_file()), None)
        if found:
            return found
    return None


def binaries() -> tuple[str, str] | None:
    """(server, install-db) when MariaDB (or MySQL's mysqld with mysql_install_db) is installed, else None."""
    server, install = _find("mariadbd", "mysqld"), _find("mariadb-install-db", "mysql_install_db")
    return (server, install) if server and install else None


class LocalMariaDB:
    """`with LocalMariaDB() as db:` a started server; `db.url(name)` without the password, `db.connect(name)`."""

    def __init__(self, binlog: bool = False) -> None:
        found = binaries()
        if found is None:
            raise RuntimeError(f"MariaDB is not installed: {INSTALL_HINT}")
        self.server, self.install = found
        self.port = free_port()
        self.host = "127.0.0.1"
        self.dir = Path(tempfile.mkdtemp(prefix="gobblin-maria-"))  # short: the socket path has a length limit
        self.data = self.dir / "data"
        self.socket = self.dir / "sock"
        self.as_root = [f"--user={pwd.getpwuid(os.geteuid()).pw_name}"] if os.geteuid() == 0 else []
        self.process: subprocess.Popen[bytes] | None = None
        self.binlog = ["--log-bin=mysql-bin", "--server-id=1", "--binlog-format=ROW", "--binlog-row-image=FULL",
                       "--binlog-row-metadata=FULL"] if binlog else ["--skip-log-bin"]
        """The binlog options (`binlog=True`: row-based, as mysql_cdc needs), else none written."""

    def start(self) -> LocalMariaDB:
        subprocess.run([self.install, "--no-defaults", f"--datadir={self.data}", "--auth-root-authentication-method=normal",
                        "--skip-test-db", *self.as_root], check=True, capture_output=True, cwd=self.dir)
        self._launch()
        with self._root() as root, root.cursor() as cur:
            cur.execute("CREATE USER %s@'%%' IDENTIFIED BY %s", (USER, PASSWORD))
            cur.execute(f"GRANT ALL ON *.* TO {USER}@'%'")
        return self

    def restart(self) -> None:
        """Stops the server (a clean shutdown) and starts it again on the same data: a new binlog file, and table ids
        counted again from the start."""
        assert self.process is not None
        self.process.terminate()
        self.process.wait(60)
        self._launch()

    def _launch(self) -> None:
        """Starts the server on the data directory and waits until root can connect."""
        log = open(self.dir / "server.log", "ab")
        tmp = self.dir / "tmp"  # its own: in the shared /tmp another server's temp table files collided with its own
        tmp.mkdir(exist_ok=True)
        self.process = subprocess.Popen(
            [self.server, "--no-defaults", f"--datadir={self.data}", f"--socket={self.socket}", f"--port={self.port}",
             f"--bind-address={self.host}", f"--pid-file={self.dir / 'pid'}", f"--tmpdir={tmp}", "--skip-name-resolve", *self.binlog,
             "--innodb-buffer-pool-size=64M", "--innodb-flush-log-at-trx-commit=0", "--performance-schema=OFF",
             *self.as_root], stdout=log, stderr=subprocess.STDOUT, cwd=self.dir)
        log.close()
        deadline = time.monotonic() + 60
        while True:
            try:
                root = self._root()
                break
            except Exception:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"MariaDB did not start: {(self.dir / 'server.log').read_text()[-2000:]}") from None
                time.sleep(0.2)
        root.close()

    def root_execute(self, *statements: str) -> None:
        """Run statements as root over the socket (SET GLOBAL, PURGE BINARY LOGS)."""
        with self._root() as conn, conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)

    def _root(self) -> Any:
        import pymysql

        return pymysql.connect(unix_socket=str(self.socket), user="root", autocommit=True)

    def stop(self) -> None:
        try:
            if self.process is not None and self.process.poll() is None:
                self.process.terminate()
                try:
                    self.process.wait(30)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait(10)
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> LocalMariaDB:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def url(self, database: str, scheme: str = "mariadb") -> str:
        """The job file's `url` (no password: that comes from `password_env`)."""
        return f"{scheme}://{USER}@{self.host}:{self.port}/{database}"

    def connect(self, database: str, autocommit: bool = True) -> Any:
        import pymysql

        return pymysql.connect(host=self.host, port=self.port, user=USER, password=PASSWORD, database=database,
                               autocommit=autocommit, charset="utf8mb4",
                               init_command="SET SESSION max_recursive_iterations = 1000000")  # the tests' WITH RECURSIVE

    def execute(self, database: str, *statements: str) -> None:
        """Run statements in `database`, committed."""
        with self.connect(database) as conn, conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)

    def query(self, database: str, statement: str) -> list[tuple[Any, ...]]:
        with self.connect(database) as conn, conn.cursor() as cur:
            cur.execute(statement)
            return list(cur.fetchall())

    def create_database(self, name: str) -> str:
        with self._root() as conn, conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{name}`")
        return name
