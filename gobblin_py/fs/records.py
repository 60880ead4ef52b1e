"""Where the job's records live: its commit log, watermarks, dataset states, run records, events and identity.

One interface, `RecordFiles`, over two kinds of work directory: a local directory (`LocalRecordFiles`, the layout of
every earlier release, each write durable and atomic) and an object store (`StoreRecordFiles`: `s3://…`, `gs://…`,
`az://…`, through obstore's conditional puts, see `fs.conditional`). Keys are slash-separated below the root.

Conditional writes: `create` writes a key only if absent, `swap` only if it still holds the version read. On an
object store the store itself refuses a stale write (an ETag precondition), so two drivers that both believe they own
the job cannot both move a record on. A local directory has no compare-and-swap of a named file: a check then a
rename lets a writer frozen between the two (a driver thread stopped with its process, SIGSTOP) rename an older
record over a newer driver's when it wakes (CDC soak seed 2481847510: a dataset's older watermarks stood, and the slot
was past them). Where two drivers may write at once (inside `numbered_versions`, which a commit under a lease enters)
a local swap therefore writes the next numbered version (`fs.conditional.NumberedVersions`, kept in a hidden folder
beside the file), created only if absent (a no-replace link):
of two writers from one version exactly one wins, at any speed, and no process waits on another. A key's value is its
highest numbered version, else the plain file (every earlier release's layout, and the one a job without a lease
keeps: one writer, the job's lock, so its conditions are checked by reading first, its version the content's checksum).
Once a key has numbered versions its plain file is only the anchor that keeps `create` failing and `names` listing it.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import crc32c

from gobblin_py import checked_json
from gobblin_py.durable import (
    atomic_replace,
    atomic_write,
    atomic_write_many,
    fsync_dir,
    remove_durably,
    remove_many_durably,
    writing,
)
from gobblin_py.errors import GobblinError, StateStoreError
from gobblin_py.fs.conditional import Blob, Blobs, Conflict, NumberedVersions, ObjectBlobs, is_url


class RecordFiles(Blobs, Protocol):
    """A work directory's records: the conditional writes of `Blobs`, plus the writes only the job's single writer
    makes (`put`, `delete`) and listing."""

    def put(self, key: str, data: bytes, midway: Callable[[], None] | None = None) -> str:
        """Write `key` whatever it holds; its new version. `midway`: called in the middle of the write (a crash
        point for tests)."""

    def delete(self, key: str) -> None:
        """Remove `key` (nothing when absent)."""

    def put_many(self, items: list[tuple[str, bytes]], midway: Callable[[], None] | None = None,
                 between: Callable[[], None] | None = None) -> None:
        """`put` each (key, data), in one durable batch where the store allows it (`between`: after the first
        write of several, a crash point)."""

    def delete_many(self, keys: list[str]) -> None:
        """`delete` each key, in one durable batch where the store allows it."""

    def names(self, prefix: str) -> list[str]:
        """The names of the records directly under `prefix/`, sorted."""

    def folders(self, prefix: str) -> list[str]:
        """The names of the folders directly under `prefix/` (`""`: the root), sorted."""

    def child(self, prefix: str) -> RecordFiles:
        """The records under `prefix/`, as a store of their own."""


def _version(data: bytes) -> str:
    return f"{crc32c.crc32c(data):08x}-{len(data)}"


_numbered: contextvars.ContextVar[bool] = contextvars.ContextVar("gobblin_py_numbered_versions", default=False)


@contextlib.contextmanager
def numbered_versions() -> Iterator[None]:
    """Local swaps inside write numbered versions (see the module's docstring): for writers that may race another
    driver of the job (a commit under a lease). A key already numbered stays numbered outside too."""
    token = _numbered.set(True)
    try:
        yield
    finally:
        _numbered.reset(token)


class LocalRecordFiles:
    """A local directory: each write atomic and durable (fsynced file and directory); a key's value is its highest
    numbered version where it has any (`NumberedVersions`), else its plain file (see the module's docstring)."""

    KEEP = 5
    """Numbered versions kept below the newest (a reader that listed them, then opens one, may find it gone: it lists
    again)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.where = str(self.root)

    def _path(self, key: str) -> Path:
        return self.root.joinpath(*key.split("/")) if key else self.root

    def _versions(self, key: str) -> NumberedVersions:
        return NumberedVersions(self._path(key), self.KEEP)

    def locate(self, key: str) -> str:
        return str(self._path(key))

    def get(self, key: str) -> Blob | None:
        versions = self._versions(key)
        found = versions.newest()
        if found is not None:
            return Blob(found[0], f"v{found[1]}")
        path = self._path(key)
        try:
            data = path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            found = versions.newest()  # its first numbered version written meanwhile
            return None if found is None else Blob(found[0], f"v{found[1]}")
        except OSError as exc:
            raise StateStoreError(f"{path}: cannot read it: {exc.strerror or exc}") from None
        return Blob(data, _version(data))

    def put(self, key: str, data: bytes, midway: Callable[[], None] | None = None) -> str:
        versions = self._versions(key)
        numbers = versions.numbers()
        if numbers:  # a numbered key stays numbered: the job's single writer (an operator's command) takes the next
            versions.write(numbers[-1] + 1, writing(data, midway))
            return f"v{numbers[-1] + 1}"
        atomic_write(self._path(key), data, midway=midway)
        return _version(data)

    def create(self, key: str, data: bytes) -> str:
        path = self._path(key)
        try:  # its new parent directories are made durably
            atomic_replace(path, lambda f: f.write(data), replace=False, mode=0o644)
        except FileExistsError:
            raise Conflict(f"{path} exists") from None
        fsync_dir(path.parent)
        return _version(data)

    def swap(self, key: str, data: bytes, version: str) -> str:
        if version.startswith("v") and version[1:].isdigit():
            self._versions(key).write(int(version[1:]) + 1, writing(data))
            return f"v{int(version[1:]) + 1}"
        current = self.get(key)
        if current is None or current.version != version:
            raise Conflict(f"{self._path(key)} changed since it was read")
        if _numbered.get():  # from the plain file to version 1: a writer frozen after this check cannot win later
            self._versions(key).write(1, writing(data))
            return "v1"
        return self.put(key, data)

    def delete(self, key: str) -> None:
        """The plain file first, then the numbered versions from the oldest: a crash midway leaves the value or none."""
        remove_durably(self._path(key))
        self._versions(key).remove()

    def put_many(self, items: list[tuple[str, bytes]], midway: Callable[[], None] | None = None,
                 between: Callable[[], None] | None = None) -> None:
        """The plain files (keys without numbered versions) written as one batch (`durable.atomic_write_many`: one
        round of fsyncs for all); a numbered key as `put` writes it."""
        plain = []
        for key, data in items:
            if self._versions(key).numbers():
                self.put(key, data, midway)
            else:
                plain.append((self._path(key), data))
        atomic_write_many(plain, midway=midway, between=between)

    def delete_many(self, keys: list[str]) -> None:
        """Every plain file, then their directories fsynced once together; then each key's numbered versions (a
        crash midway leaves a key's value or none)."""
        remove_many_durably([self._path(key) for key in keys])
        for key in keys:
            self._versions(key).remove()

    def names(self, prefix: str) -> list[str]:
        folder = self._path(prefix)
        if not folder.is_dir():
            return []
        names = set()
        for p in folder.iterdir():
            if p.name.startswith("."):  # a temp file, or a key's numbered versions: the key is its plain file
                continue
            if p.is_file():
                names.add(p.name)
        return sorted(names)

    def folders(self, prefix: str) -> list[str]:
        folder = self._path(prefix)
        return sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")) \
            if folder.is_dir() else []

    def child(self, prefix: str) -> LocalRecordFiles:
        return LocalRecordFiles(self._path(prefix))


class StoreRecordFiles(ObjectBlobs):
    """An object store (`s3://bucket/prefix`, `gs://…`, `az://…`): conditional writes refused by the store itself."""

    def __init__(self, url: str, options: dict) -> None:
        super().__init__(url, options)
        self._options = options

    def put(self, key: str, data: bytes, midway: Callable[[], None] | None = None) -> str:
        if midway is not None:  # an object appears whole or not at all: a crash before the write stands for one midway
            midway()
        return self._put(key, data, "overwrite")

    def put_many(self, items: list[tuple[str, bytes]], midway: Callable[[], None] | None = None,
                 between: Callable[[], None] | None = None) -> None:
        """One put a key (an object store has no batch: each object appears whole, at once)."""
        for n, (key, data) in enumerate(items):
            self.put(key, data, midway)
            if n == 0 and len(items) > 1 and between is not None:
                between()

    def delete_many(self, keys: list[str]) -> None:
        for key in keys:
            self.delete(key)

    def delete(self, key: str) -> None:
        import obstore

        try:
            obstore.delete(self._store, key)
        except FileNotFoundError:
            return
        except Exception as exc:
            raise StateStoreError(f"{self.where}/{key}: cannot delete it: {exc}") from None

    def _listing(self, prefix: str) -> dict:
        import obstore

        try:
            return obstore.list_with_delimiter(self._store, prefix.rstrip("/") + "/" if prefix else None)
        except FileNotFoundError:
            return {"common_prefixes": [], "objects": []}
        except Exception as exc:
            raise StateStoreError(f"{self.where}/{prefix}: cannot list it: {exc}") from None

    def names(self, prefix: str) -> list[str]:
        return sorted(n for n in (str(o["path"]).rsplit("/", 1)[-1] for o in self._listing(prefix)["objects"])
                      if n and not n.startswith("."))

    def folders(self, prefix: str) -> list[str]:
        return sorted(str(p).rstrip("/").rsplit("/", 1)[-1] for p in self._listing(prefix)["common_prefixes"])

    def child(self, prefix: str) -> StoreRecordFiles:
        return StoreRecordFiles(f"{self.where}/{prefix}", self._options)


def record_files(location: str | Path) -> RecordFiles:
    """The records at `location`: a local directory, or an object-store URL (its credentials and endpoint from the
    job's `filesystems` options of the scheme, as `fs.registry.configure` set them in this process)."""
    text = str(location)
    if not is_url(text):
        return LocalRecordFiles(Path(text.removeprefix("file://")))
    from gobblin_py.fs.registry import options_for

    return _store(text.rstrip("/"), json.dumps(options_for(text.split("://", 1)[0]), sort_keys=True, default=str))


@functools.lru_cache(maxsize=64)
def _store(url: str, options: str) -> StoreRecordFiles:
    """One client per location and options in a process: its connections are reused by every record."""
    return StoreRecordFiles(url, json.loads(options))


def read_record(files: RecordFiles, key: str, error: type[GobblinError], what: str,
                then: str = "it was not applied") -> tuple[dict[str, Any], str] | None:
    """The body and version of the checksummed record `key` (see `checked_json`); None when absent; `error` names
    where it is when it cannot be read or is not sound, ending with `then`."""
    try:
        blob = files.get(key)
    except StateStoreError as exc:
        raise error(f"{what} {exc}; {then}") from None
    if blob is None:
        return None
    return checked_json.decode(blob.data, files.locate(key), error, what, then), blob.version
