"""The `files` source's settings: where the files are, which to read and how."""

from __future__ import annotations

from pydantic import Field, field_validator

from gobblin_py.api import Settings
from gobblin_py.builtin.sources.files.reading import KNOWN_EXTENSIONS
from gobblin_py.fs.paths import ExistingDirLocation

COMPRESSION_SUFFIXES = ("", ".gz", ".bz2", ".zst", ".xz")
DEFAULT_INCLUDE = [f"*{ext}{comp}" for ext in KNOWN_EXTENSIONS for comp in COMPRESSION_SUFFIXES]


class FilesSettings(Settings):
    path: ExistingDirLocation = Field(description="the input directory or URL (s3://bucket/in): one dataset per sub-directory")
    include: list[str] = Field(default_factory=lambda: list(DEFAULT_INCLUDE),
                               description="file name patterns; the format comes from the extension under any .gz/.bz2/.zst/.xz")
    csv_delimiter: str = Field(default=",", min_length=1, max_length=1, description="one character between CSV fields")
    csv_columns: list[str] | None = Field(
        default=None, min_length=1,
        description="the column names of CSV files with no header row, in order (every row is a record); unset: the first row of each file names them")
    csv_field_size_limit: int = Field(default=16 * 1024 * 1024, ge=1,
                                      description="characters; a row with a longer field goes to the error file")
    root_dataset: str | None = Field(default=None, pattern=r"^[^/\\\x00.][^/\\\x00]*$",
                                     description="dataset of the files directly under path (default: path's last component)")
    ingest_appended: bool = Field(default=False, description="read bytes appended to an ingested uncompressed file")
    pack_bytes: int = Field(
        default=64 * 1024 * 1024, ge=0,
        description="new files of a dataset smaller than this are packed into one task (one output file) of up to this "
                    "many bytes, each file keeping its own watermark; 0: one task per file (the default with an iceberg or delta "
                    "publisher, which knows a re-read by its files' names)")
    pack_files: int = Field(default=2000, ge=1, description="at most this many files in one packed task")

    @field_validator("csv_columns")
    @classmethod
    def _named_once(cls, columns: list[str] | None) -> list[str] | None:
        """Each column named, and once: a record is a mapping of name to value, so a repeated name would lose one."""
        if columns is not None:
            if any(not c for c in columns):
                raise ValueError("a column name is empty")
            repeated = sorted({c for c in columns if columns.count(c) > 1})
            if repeated:
                raise ValueError(f"column names repeated: {', '.join(repeated)}")
        return columns
