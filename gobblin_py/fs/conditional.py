"""Conditional writes on a local directory or an object store: the one interface the job's lease is written through.

Two hosts can only agree through a store that refuses a stale write. Object stores do this with preconditions:
create-if-absent (`If-None-Match: *`) and compare-and-swap (`If-Match: <etag>` on S3 and Azure, a generation on GCS).
`obstore` (the Python binding of the Rust `object_store` crate, which delta-rs also uses) exposes both as put modes for
S3, GCS and Azure behind one call, and raises a distinct error for each failed precondition; fsspec/s3fs expose
neither portably, so this module uses obstore for URLs. A local directory has no compare-and-swap, so `LocalBlobs`
builds one from numbered versions, each created only if absent, and no locks (a frozen writer must block nobody):
correct among the processes of one host, or of hosts sharing a filesystem whose exclusive create holds across them
(NFSv4).

A version is opaque (an ETag, or a local version number). Callers put a fresh nonce in every body they
write, so two writes never share a version (an ETag is the MD5 of the bytes: equal bodies would share one).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from gobblin_py.durable import atomic_replace, fsync_dir, makedirs_durably
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


class LocalBlobs:
    """A local directory, without locks: each write of a key is a new file `<key>.v<N>`, created only if absent (a
    no-replace rename), and the key's value is its highest version. Create is version 1; a swap from version N creates
    N + 1 and holds only while no higher version exists. No process ever waits on another, so a writer frozen in the
    middle of a write (SIGSTOP) blocks nobody. Versions more than `KEEP` below the newest are removed."""

    KEEP = 20

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.where = str(self.root)

    def _path(self, key: str) -> Path:
        return self.root.joinpath(*key.split("/"))

    def _versions(self, key: str) -> list[int]:
        path = self._path(key)
        prefix = path.name + ".v"
        try:
            names = os.listdir(path.parent)
        except FileNotFoundError:
            return []
        return sorted(int(n[len(prefix):]) for n in names if n.startswith(prefix) and n[len(prefix):].isdigit())

    def get(self, key: str) -> Blob | None:
        for _ in range(5):  # the newest may be removed by a writer's clean-up meanwhile: list again
            versions = self._versions(key)
            if not versions:
                return None
            path = self._path(key)
            try:
                return Blob(path.with_name(f"{path.name}.v{versions[-1]}").read_bytes(), str(versions[-1]))
            except FileNotFoundError:
                continue
        raise StateStoreError(f"{self._path(key)}: its versions kept changing while read")

    def _write(self, key: str, data: bytes, version: int) -> str:
        path = self._path(key)
        makedirs_durably(path.parent)
        try:
            atomic_replace(path.with_name(f"{path.name}.v{version}"), lambda f: f.write(data), replace=False, mode=0o644)
        except FileExistsError:
            raise Conflict(f"{path} version {version} exists: another writer was first") from None
        fsync_dir(path.parent)
        newest = self._versions(key)
        if newest and newest[-1] != version:  # a higher version already stood: this write is not the key's value
            raise Conflict(f"{path} moved on to version {newest[-1]}")
        for old in newest[:-self.KEEP]:
            if old != 1:  # version 1 stays: a create must keep failing once the key exists
                with contextlib.suppress(FileNotFoundError):
                    path.with_name(f"{path.name}.v{old}").unlink()
        return str(version)

    def create(self, key: str, data: bytes) -> str:
        return self._write(key, data, 1)

    def locate(self, key: str) -> str:
        return f"{self._path(key)}.v*"

    def swap(self, key: str, data: bytes, version: str) -> str:
        return self._write(key, data, int(version) + 1)


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
