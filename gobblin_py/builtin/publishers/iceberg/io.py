"""pyiceberg's FileIO over the job's own filesystems: the table's metadata and data files are read and written with
the fsspec instance `job.filesystems` configures (endpoint, options; credentials from the store's environment), so a
warehouse on S3 needs no second, pyiceberg-specific set of options. Named in the catalog's `py-io-impl`."""

from __future__ import annotations

from typing import Any

from pyiceberg.io.fsspec import FsspecFileIO

from gobblin_py.fs import filesystem_for
from gobblin_py.fs.remote import FsspecFileSystem

IO_IMPL = "gobblin_py.builtin.publishers.iceberg.io.JobFileIO"


class JobFileIO(FsspecFileIO):
    """pyiceberg's fsspec FileIO with every remote scheme served by `gobblin_py.fs.filesystem_for` (local paths as pyiceberg does)."""

    def get_fs(self, scheme: str, hostname: str | None = None) -> Any:
        if scheme in ("", "file", "local"):
            return super().get_fs("file", hostname)
        fs = filesystem_for(f"{scheme}://{hostname or 'bucket'}")
        if not isinstance(fs, FsspecFileSystem):  # pragma: no cover - every remote scheme is fsspec's
            return super().get_fs(scheme, hostname)
        return fs.fs
