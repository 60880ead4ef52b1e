"""pyiceberg's FileIO over the job's own filesystems: the table's metadata and data files are read and written with
the fsspec instance `job.filesystems` configures (endpoint, options; credentials from the store's environment), so a
warehouse on S3 needs no second, pyiceberg-specific set of options. Named in the catalog's `py-io-impl`."""

from __future__ import annotations

from typing import Any

from pyiceberg.io import OutputFile
from pyiceberg.io.fsspec import FsspecFileIO

from gobblin_py.crashpoints import crash_point
from gobblin_py.fs import filesystem_for
from gobblin_py.fs.remote import FsspecFileSystem

IO_IMPL = "gobblin_py.builtin.publishers.iceberg.io.JobFileIO"
METADATA_POINT = "iceberg.metadata_written"
"""Crash point: a table's new metadata file is written and closed, the catalog not yet pointing at it (for a table
being created: its location holds metadata the catalog has no row for)."""


class JobFileIO(FsspecFileIO):
    """pyiceberg's fsspec FileIO with every remote scheme served by `gobblin_py.fs.filesystem_for` (local paths as pyiceberg does)."""

    def get_fs(self, scheme: str, hostname: str | None = None) -> Any:
        if scheme in ("", "file", "local"):
            return super().get_fs("file", hostname)
        fs = filesystem_for(f"{scheme}://{hostname or 'bucket'}")
        if not isinstance(fs, FsspecFileSystem):  # pragma: no cover - every remote scheme is fsspec's
            return super().get_fs(scheme, hostname)
        return fs.fs

    def new_output(self, location: str) -> OutputFile:
        out = super().new_output(location)
        return _MetadataOutput(out) if location.endswith(".metadata.json") else out


class _MetadataOutput(OutputFile):
    """A table metadata file whose stream passes `METADATA_POINT` once closed."""

    def __init__(self, out: OutputFile) -> None:
        super().__init__(out.location)
        self._out = out

    def __len__(self) -> int:
        return len(self._out)

    def exists(self) -> bool:
        return self._out.exists()

    def to_input_file(self) -> Any:
        return self._out.to_input_file()

    def create(self, overwrite: bool = False) -> Any:
        return _PointOnClose(self._out.create(overwrite=overwrite))


class _PointOnClose:
    """The metadata file's stream; `METADATA_POINT` once it is closed, the file complete."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, b: bytes) -> int:
        return self._stream.write(b)

    def tell(self) -> int:
        return self._stream.tell()

    def close(self) -> None:
        self._stream.close()
        crash_point(METADATA_POINT)

    def __enter__(self) -> _PointOnClose:
        return self

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if exc_type is None:
            self.close()
        else:  # a write that failed: no complete metadata file to crash after
            self._stream.close()
