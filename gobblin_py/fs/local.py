"""The local filesystem (also shared mounts such as NFS): POSIX rename and fsync."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path
from typing import IO

from gobblin_py.durable import atomic_replace, file_checksum, makedirs_durably, rename_noreplace
from gobblin_py.errors import FileSystemError
from gobblin_py.fs.base import NOT_A_FILE, FileSystem
from gobblin_py.fs.location import Location


class LocalFileSystem(FileSystem):
    atomic_rename = True

    def size(self, path: Location) -> int | None:
        try:
            return os.stat(path).st_size
        except FileNotFoundError:
            return None

    def exists(self, path: Location) -> bool:
        return os.path.exists(path)

    def checksum(self, path: Location) -> str:
        return file_checksum(Path(path))

    def rename(self, src: Location, dst: Location) -> None:
        """Never replaces: FileExistsError when `dst` exists; OSError EXDEV across mounts (the step copies then)."""
        makedirs_durably(Path(dst).parent)
        rename_noreplace(Path(src), Path(dst))

    def copy(self, src: Location, dst: Location) -> None:
        self.put(Path(src), dst)

    def put(self, local: Path, dst: Location) -> None:
        """Copy to a temp file beside `dst` with the source's mode (as a rename keeps it), fsync it, then move it to
        `dst` without replacing a file there (FileExistsError). The commit sequence fsyncs the directory."""
        with open(local, "rb") as src:
            atomic_replace(Path(dst), lambda out: shutil.copyfileobj(src, out, 1 << 20),
                           replace=False, mode=os.fstat(src.fileno()).st_mode & 0o7777)

    def open_read(self, path: Location) -> IO[bytes]:
        return open(path, "rb")

    def delete(self, path: Location) -> None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass

    def rmtree(self, path: Location) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def listdir(self, path: Location) -> list[Location]:
        try:
            return [path / name for name in sorted(os.listdir(path))]
        except (FileNotFoundError, NotADirectoryError):
            return []

    def find(self, root: Location) -> dict[Location, int]:
        """As `os.walk` (symlinked directories listed but not entered) with a stat of each file, relative to its open
        directory (a third cheaper than by full path); the paths are made `Location`s as listed (the root's location
        joined with entry names), not parsed again: a listing of 50,000 files spent 0.7 s of its 1.2 s parsing them."""
        found: dict[str, int] = {}
        todo = [str(root)]
        while todo:
            directory = todo.pop()
            try:
                fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
            except FileNotFoundError:
                continue  # gone since its parent was listed (or no root): nothing to read there
            except OSError as exc:
                raise FileSystemError(f"cannot list directory {exc.filename or directory}: {exc.strerror}") from exc
            try:
                try:
                    with os.scandir(fd) as entries:
                        listed = list(entries)
                except OSError as exc:
                    raise FileSystemError(f"cannot list directory {directory}: {exc.strerror}") from exc
                prefix = directory if directory.endswith("/") else directory + "/"
                for entry in listed:
                    try:
                        is_dir = entry.is_dir()
                    except OSError:
                        is_dir = False
                    if is_dir:
                        if not entry.is_symlink():
                            todo.append(prefix + entry.name)
                        continue
                    try:
                        st = os.stat(entry.name, dir_fd=fd)
                    except FileNotFoundError:
                        if entry.is_symlink():
                            found[prefix + entry.name] = NOT_A_FILE
                        continue  # else gone since listed
                    found[prefix + entry.name] = st.st_size if stat.S_ISREG(st.st_mode) else NOT_A_FILE
            finally:
                os.close(fd)
        return {Location.listed(path): size for path, size in sorted(found.items())}

    def is_dir(self, path: Location) -> bool:
        return os.path.isdir(path)

    def sync_dir(self, path: Location) -> str | None:
        return str(path)

    @staticmethod
    def same_device(a: Location, b: Location) -> bool:
        """Whether a rename from `a` to `b` can work (`b` may not exist yet: its nearest existing parent counts)."""
        def device(p: str) -> int | None:
            while True:
                try:
                    return os.stat(p).st_dev
                except OSError:  # missing, or a file in the way: the step itself reports that
                    parent = os.path.dirname(p)
                    if parent == p:
                        return None
                    p = parent
        da, db = device(a), device(b)
        return da is None or db is None or da == db

