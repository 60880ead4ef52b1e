"""A block of CSV rows (`api.CsvBlock`) → one Arrow record batch of an Avro schema, exactly as the `json_to_avro`
converter shapes each row's record (every value text), or None where exactness cannot be shown for the block (it
then takes the row path, Python's `csv` and the converter record by record).

pyarrow's CSV reader parses the block in C++, every column as text, with the row path's dialect: the job's
delimiter, `"` quotes doubled inside a quoted field, no escape character, newlines inside quoted fields, blank lines
skipped and no text read as null. Arrow refuses what Python's `csv` rejects row by row — a row of another width,
invalid UTF-8 — and the reader refuses a field over the size limit, a bare "\\r" (a line end to Arrow, an error to
Python) and a header that repeats a name. Each column is then cast to its field's type only where a guard over the
whole column shows the cast gives what the converter's coercion (`_to_long` …) gives: integers of ASCII digits with
an optional sign (and spaces or tabs around them, which `int()` strips), decimal or exponent numbers for doubles (no
`nan`, `inf`, `_` or non-ASCII digits, which `float()` also takes), booleans spelt as the converter takes them
(`true`/`false`/`yes`/`no`/`1`/`0` in any case), timestamps all epoch milliseconds or all ISO text of the plain
form (`arrow_fields.ISO`). An empty cell of a nullable field is null (a field with a default other than null keeps
to the row path); a column the schema lacks is dropped and counted as the converter counts it, or, under
`on_unknown_fields: fail`, sends the block to the row path, where each of its records is refused.
"""

from __future__ import annotations

import io
from typing import Any

from gobblin_py.api import CsvBlock
from gobblin_py.builtin.converters.arrow_fields import ISO, FlatField, flat_fields, iso_millis

_SPACE = r"[ \t]*"  # what `str.strip()` takes off that Arrow's casts refuse, and the only such text let through
_GUARDS = {
    "long": rf"^{_SPACE}[+-]?[0-9]+{_SPACE}$",
    "int": rf"^{_SPACE}[+-]?[0-9]+{_SPACE}$",
    "double": rf"^{_SPACE}[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?{_SPACE}$",
    "boolean": rf"^{_SPACE}(?:[Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee]|[Yy][Ee][Ss]|[Nn][Oo]|1|0){_SPACE}$",
}
"""Text each kind's coercion and Arrow's cast (after the trims below) read as the same value."""
_MILLIS = rf"^{_SPACE}-?[0-9]+{_SPACE}$"  # epoch milliseconds as `_to_millis` reads digits: no "+" (not a digit)
_PLAIN_BOOLEANS = ["true", "false", "yes", "no", "1", "0"]  # what `_GUARDS["boolean"]` passes and its trim and case leave as is
_TRUE = ["true", "yes", "1"]  # of those, the true ones

class CsvArrowReader:
    """Reads a `CsvBlock` into a `pyarrow.RecordBatch` of `avro_schema` (see the module docstring) and the columns
    it dropped; `supported` is False for a schema outside the flat types, and `read` then always says None."""

    def __init__(self, avro_schema: dict[str, Any], on_unknown_fields: str) -> None:
        self.supported = False
        flat = flat_fields(avro_schema)
        if flat is None:
            return
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.csv as pcsv

        self._pa, self._pc, self._pcsv = pa, pc, pcsv
        self.schema, self._fields = flat
        self._names = {f.name for f in self._fields}
        self._drop = on_unknown_fields == "drop"
        self._plain_booleans, self._true = pa.array(_PLAIN_BOOLEANS), pa.array(_TRUE)
        self.supported = True

    def read(self, block: CsvBlock) -> tuple[Any, list[str]] | None:
        """(the block's records as a batch, the names of the columns dropped from each), or None: the row path."""
        columns = list(block.columns)
        if not self.supported or not columns or len(set(columns)) != len(columns):
            return None
        dropped = [c for c in columns if c not in self._names]
        if dropped and not self._drop:
            return None
        data = block.data
        if b"\r" in data and data.count(b"\r") != data.count(b"\r\n"):
            return None
        table = self._parsed(block, columns)
        if table is None or not table.num_rows:
            return None
        if block.field_size_limit < len(data):  # else no field can be longer
            pc = self._pc
            for array in table.columns:  # no more characters than bytes: count characters only past the limit
                if (pc.max(pc.binary_length(array)).as_py() > block.field_size_limit
                        and pc.max(pc.utf8_length(array)).as_py() > block.field_size_limit):
                    return None
        out = []
        for field in self._fields:
            array = table.column(field.name).chunk(0) if field.name in table.column_names else None
            cast = self._cast(field, array, table.num_rows)
            if cast is None:
                return None
            out.append(cast)
        return self._pa.RecordBatch.from_arrays(out, schema=self.schema), dropped

    def _parsed(self, block: CsvBlock, columns: list[str]) -> Any | None:
        """The block as a table of one chunk, every column text; None when Arrow refuses it."""
        pa, pcsv = self._pa, self._pcsv
        data = block.data
        read = pcsv.ReadOptions(column_names=columns, use_threads=False, block_size=len(data) + 1)
        parse = pcsv.ParseOptions(delimiter=block.delimiter, quote_char='"', double_quote=True, escape_char=False,
                                  newlines_in_values=b'"' in data, ignore_empty_lines=True)
        convert = pcsv.ConvertOptions(column_types={c: pa.string() for c in columns}, strings_can_be_null=False,
                                      quoted_strings_can_be_null=False, null_values=[], check_utf8=True)
        try:
            table = pcsv.read_csv(io.BytesIO(data), read_options=read, parse_options=parse, convert_options=convert)
        except (pa.ArrowException, ValueError):
            return None
        return table.combine_chunks()

    def _cast(self, field: FlatField, array: Any, rows: int) -> Any | None:
        """The column of `field` as the converter makes each row's value of the text in `array` (None: the field is
        no column, each value missing), or None when a value needs the row path."""
        pa, pc = self._pa, self._pc
        target = self.schema.field(field.index).type
        if array is None:  # missing from every record: null, where the converter gives null for a missing value
            return pa.nulls(rows, target) if field.nullable and not field.has_default else None
        blank = None
        if field.nullable:
            blank = pc.equal(array, "")
            blanks = pc.sum(blank).as_py()
            if not blanks:
                blank = None
            elif field.has_default:
                return None  # the converter puts the default in place of an empty cell
            elif blanks == rows:
                return pa.nulls(rows, target)
            else:  # the others cast, these null (guards and casts pass nulls by)
                array = pc.if_else(blank, pa.scalar(None, pa.string()), array)
        cast = self._typed(field.kind, array, target)
        if cast is None or blank is None:
            return cast
        return pc.if_else(blank, pa.scalar(None, target), cast)

    def _typed(self, kind: str, text: Any, target: Any) -> Any | None:
        """`text` as `target` (a null stays null), when every value passes its kind's guard; else None. A column
        whose values are all plain ASCII digits (integers, epoch milliseconds; doubles with at most one "."), or
        booleans spelt in lower case, passes its guard unchanged by the trims, so it skips the guard's regular
        expression and the trims."""
        pa, pc = self._pa, self._pc
        if kind == "string":
            return text
        if kind == "boolean" and pc.all(pc.is_in(text, value_set=self._plain_booleans)).as_py():
            return pc.is_in(text, value_set=self._true)
        if kind == "double":  # digits with at most one "." among them (not alone): as the guard, no regex
            plain = pc.all(pc.ascii_is_decimal(pc.replace_substring(text, ".", "", max_replacements=1))).as_py()
        else:
            plain = kind != "boolean" and pc.all(pc.ascii_is_decimal(text)).as_py()
        if kind == "timestamp" and not plain and pc.all(pc.match_substring_regex(text, ISO)).as_py():
            return iso_millis(text, target, checked=True)
        if not plain:
            if not pc.all(pc.match_substring_regex(text, _MILLIS if kind == "timestamp" else _GUARDS[kind])).as_py():
                return None
            text = pc.ascii_trim(text, " \t")
            if kind == "boolean":
                return pc.is_in(pc.ascii_lower(text), value_set=self._true)
            if kind in ("long", "int") and pc.any(pc.starts_with(text, "+")).as_py():
                text = pc.replace_substring_regex(text, r"^\+", "")  # `int()` takes a "+", Arrow's cast does not
        try:
            cast = text.cast(pa.int64() if kind == "timestamp" else target)
        except (pa.ArrowException, ValueError):  # beyond the type's range: the converter refuses it
            return None
        if kind == "timestamp":
            return cast.cast(target)
        if kind == "double" and not pc.all(pc.is_finite(cast)).as_py():
            return None
        return cast
