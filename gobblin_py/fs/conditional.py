"""Conditional writes on a local directory or an object store: the one interface the job's lease is written through.

Two hosts can only agree through a store that refuses a stale write. Object stores do this with preconditions:
create-if-absent (`If-None-Match: *`) and compare-and-swap (`If-Match: <etag>` on S3 and Azure, a generation on GCS).
`obstore` (the Python binding of the Rust `object_store` crate, which delta-rs also uses) exposes both as put modes for
S3, GCS and Azure behind one call, and raises a distinct error for each failed precondition; fsspec/s3fs expose
neither portably, so this module uses obstore for URLs. A local directory has no compare-and-swap of a named file,
and a lock would let a frozen holder (SIGSTOP, or a driver thread stopped with its process) block everyone; so
`NumberedVersions` builds one for the lease (`LocalBlobs`) and the records (`fs.records`): each write of a value is a
new file, created only if absent (a no-replace link) and named by its number, so of two writers from one version
exactly one wins, at any speed, and no process waits on another. This is correct among the processes of one host, or
of hosts sharing a filesystem whose exclusive create holds across them (NFSv4).

A version is opaque (an ETag, or a local version number). Callers put a fresh nonce in every body they
write, so two writes never share a version (an ETag is the MD5 of the bytes: equal bodies would share one).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from gobblin_py.durable import atomic_replace, fsync_dir, makedirs_durably, remove_durably
from gobblin_py.errors import ConfigError, StateStoreError


class Conflict(Exception):
    """A conditional write lost: the key exists (create) or holds another version (swap)."""


@dataclass(frozen=True)
class Blob:
    """A key's bytes and the version a swap must name."""

    data: bytes
    version: str


class Blobs(Protocol):
    """Keys (slash-separated) under one root; every write is conditional."""

    where: str

    def get(self, key: str) -> Blob | None:
        """The key's bytes and version, None when absent."""

    def create(self, key: str, data: bytes) -> str:
        """Write `key` only if absent (Conflict otherwise); its new version."""

    def swap(self, key: str, data: bytes, version: str) -> str:
        """Replace `key` only if it still holds `version` (Conflict otherwise); its new version."""

    def locate(self, key: str) -> str:
        """What holds `key`, for a person to restore or delete: a URL, or a directory's files."""


_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$")


def is_url(location: str) -> bool:
    return bool(_URL.match(location)) and not location.lower().startswith("file://")


def open_blobs(location: str | Path, filesystems: Mapping[str, Mapping[str, Any]] | None = None) -> Blobs:
    """The store at `location`: a local directory, or `s3://bucket/prefix`, `gs://…`, `az://…` (credentials and an
    endpoint from the job's `filesystems` options for the scheme, else the environment)."""
    text = str(location)
    if not is_url(text):
        return LocalBlobs(Path(text.removeprefix("file://")))
    return ObjectBlobs(text, (filesystems or {}).get(text.split("://", 1)[0].lower(), {}))


def versions_folder(path: Path) -> Path:
    """Where the numbered versions of `path` live: a hidden folder beside it, so that reading a file without any costs
    one failed lookup, not a listing of its directory (thousands of datasets' watermarks), and a listing of the
    directory shows each key once."""
    return path.with_name(f".{path.name}.versions")


_BESIDE = re.compile(r"^([^.].*)\.v(\d+)$")
_UPGRADED: set[str] = set()


def _upgrade(folder: Path) -> None:
    """Move the numbered versions an earlier build kept beside their file (`<name>.v<N>`) into their folder, once per
    folder and process, before anything there is read: left beside, they would be ignored and the file's older plain
    value read instead."""
    if str(folder) in _UPGRADED:
        return
    try:
        names = os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        names = []
    except OSError as exc:
        raise StateStoreError(f"{folder}: cannot list it: {exc.strerror or exc}") from None
    for name in names:
        beside = _BESIDE.match(name)
        if beside is None:
            continue
        target = versions_folder(folder / beside.group(1)) / beside.group(2)
        makedirs_durably(target.parent)
        try:
            os.link(folder / name, target)
        except FileExistsError:
            pass
        except FileNotFoundError:  # another process moved it meanwhile
            continue
        fsync_dir(target.parent)
        remove_durably(folder / name)
    _UPGRADED.add(str(folder))


class NumberedVersions:
    """The numbered versions of the file at `path`; the newest is its value. `keep`: versions kept below the newest (a
    reader that listed them, then opens one, may find it removed and lists again); `kept`: numbers never removed."""

    def __init__(self, path: Path, keep: int, kept: frozenset[int] = frozenset()) -> None:
        self.path, self.keep, self.kept = Path(path), keep, kept
        self.folder = versions_folder(self.path)
        _upgrade(self.path.parent)

    def numbers(self) -> list[int]:
        """The numbers written, ascending ([] when none)."""
        try:
            names = os.listdir(self.folder)
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            raise StateStoreError(f"{self.folder}: cannot list it: {exc.strerror or exc}") from None
        return sorted(int(n) for n in names if n.isdigit())

    def file(self, number: int) -> Path:
        return self.folder / str(number)

    def newest(self) -> tuple[bytes, int] | None:
        """The newest version's bytes and number; None when there is none."""
        for _ in range(5):  # the newest may be removed by a writer's clean-up meanwhile: list again
            numbers = self.numbers()
            if not numbers:
                return None
            try:
                return self.file(numbers[-1]).read_bytes(), numbers[-1]
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise StateStoreError(f"{self.file(numbers[-1])}: cannot read it: {exc.strerror or exc}") from None
        raise StateStoreError(f"{self.path}: its numbered versions kept changing while read")

    def write(self, number: int, write: Callable[[BinaryIO], None]) -> None:
        """Create version `number` only if absent; Conflict when it exists, or when a higher one already stood (then
        it is not the value, and is removed again). Versions `keep` below it are removed."""
        makedirs_durably(self.folder)
        target = self.file(number)
        try:
            atomic_replace(target, write, replace=False, mode=0o644)
        except FileExistsError:
            raise Conflict(f"{self.path} version {number} exists: another writer was first") from None
        fsync_dir(self.folder)
        numbers = self.numbers()
        if numbers and numbers[-1] != number:  # a stale writer's number below the newest: not the value
            with contextlib.suppress(FileNotFoundError):
                target.unlink()
            raise Conflict(f"{self.path} moved on to version {numbers[-1]}")
        for old in numbers[:-self.keep - 1]:
            if old not in self.kept:
                with contextlib.suppress(FileNotFoundError):
                    self.file(old).unlink()

    def remove(self) -> None:
        """Every version, oldest first (a crash midway leaves the value or none), then the folder."""
        for number in self.numbers():
            remove_durably(self.file(number))
        try:
            self.folder.rmdir()
        except FileNotFoundError:
            return  # another remover was first
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
            return  # not empty: a writer added a version meanwhile, which is the value now
        fsync_dir(self.folder.parent)  # a failure here is the caller's to see: the removal may not be durable


class LocalBlobs:
    """A local directory, without locks: each write of a key is its next numbered version (`NumberedVersions`), and the
    key's value is its highest. Create is version 1, kept for good so that a create keeps failing once the key exists;
    a swap from version N creates N + 1 and holds only while no higher version exists. No process ever waits on
    another, so a writer frozen in the middle of a write (SIGSTOP) blocks nobody."""

    KEEP = 20

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.where = str(self.root)

    def _versions(self, key: str) -> NumberedVersions:
        return NumberedVersions(self.root.joinpath(*key.split("/")), self.KEEP, kept=frozenset({1}))

    def get(self, key: str) -> Blob | None:
        found = self._versions(key).newest()
        return None if found is None else Blob(found[0], str(found[1]))

    def create(self, key: str, data: bytes) -> str:
        self._versions(key).write(1, lambda f: f.write(data))
        return "1"

    def locate(self, key: str) -> str:
        return str(self._versions(key).folder)

    def swap(self, key: str, data: bytes, version: str) -> str:
        self._versions(key).write(int(version) + 1, lambda f: f.write(data))
        return str(int(version) + 1)


class ObjectBlobs:
    """An object store through obstore's conditional puts (`mode="create"`, `mode={"e_tag": …}`)."""

    def __init__(self, url: str, options: Mapping[str, Any]) -> None:
        try:
            import obstore  # noqa: F401
            from obstore.store import from_url
        except ImportError:
            raise ConfigError(f"{url}: a lease on an object store needs obstore: pip install 'gobblin-py[s3]'") from None
        self.where = url.rstrip("/")
        scheme = url.split("://", 1)[0].lower()
        config: dict[str, Any] = {}
        client: dict[str, Any] = {}
        if scheme in ("s3", "s3a"):
            endpoint = options.get("endpoint_url") or (options.get("client_kwargs") or {}).get("endpoint_url")
            if endpoint:
                config["endpoint"] = endpoint
                if str(endpoint).startswith("http://"):
                    client["allow_http"] = True
            if options.get("key"):
                config["access_key_id"] = options["key"]
            if options.get("secret"):
                config["secret_access_key"] = options["secret"]
            region = options.get("region") or (options.get("client_kwargs") or {}).get("region_name") \
                or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
            if region:
                config["region"] = region
            config["conditional_put"] = "etag"
            url = "s3://" + url.split("://", 1)[1]
        try:
            self._store = from_url(url, config=config or None, client_options=client or None)
        except Exception as exc:  # obstore's configuration errors: name the URL
            raise ConfigError(f"{url}: cannot open the object store: {exc}") from None

    def get(self, key: str) -> Blob | None:
        import obstore
        from obstore.exceptions import NotFoundError

        try:
            got = obstore.get(self._store, key)
            data = bytes(got.bytes())
        except (NotFoundError, FileNotFoundError):  # obstore raises the builtin one for a missing key
            return None
        except Exception as exc:
            raise StateStoreError(f"{self.where}/{key}: cannot read it: {exc}") from None
        return Blob(data, str(got.meta["e_tag"]))

    def create(self, key: str, data: bytes) -> str:
        return self._put(key, data, "create")

    def locate(self, key: str) -> str:
        return f"{self.where}/{key}"

    def swap(self, key: str, data: bytes, version: str) -> str:
        return self._put(key, data, {"e_tag": version})

    def delete(self, key: str) -> None:
        import obstore

        with contextlib.suppress(Exception):  # a probe left behind is harmless
            obstore.delete(self._store, key)

    def _put(self, key: str, data: bytes, mode: Any) -> str:
        import obstore
        from obstore.exceptions import AlreadyExistsError, NotSupportedError, PreconditionError

        try:
            return str(obstore.put(self._store, key, data, mode=mode)["e_tag"])
        except (AlreadyExistsError, PreconditionError) as exc:
            raise Conflict(f"{self.where}/{key}: {type(exc).__name__}") from None
        except NotSupportedError as exc:
            raise ConfigError(f"{self.where}: the store does not support conditional writes ({exc}); a lease needs "
                              "create-if-absent and compare-and-swap (S3 since 2024, GCS, Azure)") from None
        except Exception as exc:
            raise StateStoreError(f"{self.where}/{key}: cannot write it: {exc}") from None


def check_enforced(blobs: Blobs) -> None:
    """Refuse a store that accepts a second create of one key (it ignores `If-None-Match`): a lease on it would let two
    drivers both believe they hold the job. Two writes and a delete of a probe key; a local directory always enforces."""
    if not isinstance(blobs, ObjectBlobs):
        return
    import uuid

    key = f".conditional-write-probe/{uuid.uuid4().hex}"
    blobs.create(key, b"1")
    try:
        blobs.create(key, b"2")
    except Conflict:
        enforced = True
    else:
        enforced = False
    finally:
        blobs.delete(key)
    if not enforced:
        raise ConfigError(f"{blobs.where} does not enforce conditional writes (a second create-if-absent of one key "
                          "succeeded): a lease there cannot keep two drivers of the job apart. Use a store that enforces "
                          "If-None-Match and If-Match (AWS S3 since 2024, GCS, Azure), or leave job.lease.url unset "
                          "and run the job on one host")
