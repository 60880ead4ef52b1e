"""Which FileSystem serves a Location: local paths by `LocalFileSystem`, URLs by fsspec.

Options per scheme (`job.filesystems`, e.g. an S3 endpoint) are set once per process with
`configure`; credentials come from the store's usual environment (AWS_ACCESS_KEY_ID …).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from gobblin_py.errors import ConfigError
from gobblin_py.fs.base import FileSystem
from gobblin_py.fs.local import LocalFileSystem
from gobblin_py.fs.location import Location

_LOCAL = LocalFileSystem()
_options: dict[str, dict[str, Any]] = {}
_cache: dict[tuple[int, str], FileSystem] = {}

DEFAULT_OPTIONS: dict[str, dict[str, Any]] = {
    "s3": {"use_listings_cache": False},  # another process (an executor, a crashed run) changes the bucket
}

EXTRAS = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "abfs": "adlfs", "az": "adlfs", "hdfs": "pyarrow"}


def configure(options: dict[str, dict[str, Any]]) -> None:
    """Set the fsspec options of each scheme for this process (the driver, and each task before it works)."""
    if options != _options:
        _options.clear()
        _options.update({k.lower(): dict(v) for k, v in options.items()})
        _cache.clear()


def options_for(scheme: str) -> dict[str, Any]:
    """The job's options of `scheme` as `configure` set them in this process (`job.filesystems.<scheme>`)."""
    return dict(_options.get(scheme.lower(), {}))


def filesystem_for(location: Location | str) -> FileSystem:
    """The filesystem of `location`, one instance per scheme and process (a forked worker makes its own)."""
    location = Location(location)
    scheme = location.scheme
    if scheme == "file":
        return _LOCAL
    key = (os.getpid(), scheme)
    fs = _cache.get(key)
    if fs is None:
        import fsspec

        from gobblin_py.fs.remote import FsspecFileSystem

        check_scheme(scheme)
        opts = {**DEFAULT_OPTIONS.get(scheme, {}), **_options.get(scheme, {})}
        try:
            impl = fsspec.filesystem(scheme, skip_instance_cache=True, **opts)
        except Exception as exc:  # noqa: BLE001 - each implementation raises its own types
            raise ConfigError(f"job.filesystems.{scheme}: cannot set up the {scheme}:// filesystem with these options "
                              f"({type(exc).__name__}: {exc})") from None
        fs = _cache[key] = FsspecFileSystem(scheme, impl)
    return fs


def check_scheme(scheme: str) -> None:
    """Raise ConfigError when no installed fsspec implementation serves `scheme`."""
    if scheme == "file":
        return
    import fsspec

    try:
        fsspec.get_filesystem_class(scheme)
    except (ValueError, ImportError) as exc:
        extra = EXTRAS.get(scheme)
        hint = ""
        if extra is not None:
            hint = f"; install it with `pip install {extra}`" + (" (or `pip install 'gobblin-py[s3]'`)" if extra == "s3fs" else "")
        raise ConfigError(f"no filesystem for {scheme}:// ({exc}){hint}") from None


def transfer(src: Location, dst: Location) -> None:
    """Copy `src` to `dst`, across filesystems if need be: server-side within one store, else by upload."""
    src_fs, dst_fs = filesystem_for(src), filesystem_for(dst)
    if src_fs is dst_fs:
        dst_fs.copy(src, dst)
    elif src.is_local:
        dst_fs.put(src.path, dst)
    else:
        with tempfile.TemporaryDirectory(prefix="gobblin-py-transfer-") as tmp:
            local = Path(tmp) / "file"
            with src_fs.open_read(src) as stream, open(local, "wb") as out:
                shutil.copyfileobj(stream, out, 1 << 22)
            dst_fs.put(local, dst)
