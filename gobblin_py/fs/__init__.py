"""The filesystem layer: local paths and any fsspec-served URL (`s3://`, `hdfs://` …), for writers and commit steps."""

from gobblin_py.fs.base import FileSystem
from gobblin_py.fs.location import Location
from gobblin_py.fs.registry import check_scheme, configure, filesystem_for, transfer

__all__ = ["FileSystem", "Location", "check_scheme", "configure", "filesystem_for", "transfer"]
