"""JSON documents → one Arrow record batch of an Avro schema, exactly as the `json_to_avro` converter shapes them
record by record, or None where exactness cannot be shown for the batch (it then takes the row path).

pyarrow's JSON reader parses a whole batch in C++ against an explicit schema (about 1 µs a record against
the row path's 10). It is stricter than `json_to_avro` — no text-to-number coercion, no unknown fields, no
duplicate keys — and every such case is an error here, which sends the batch to the row path, where the converter
coerces, drops-and-counts or refuses each record as always. A timestamp field holds epoch milliseconds or ISO-8601
text: a batch whose timestamps are all text of the plain form both readers take alike (`arrow_fields.ISO`: date, hours and
minutes, seconds and up to 3 decimals optional, all with a zone or all without, read as UTC) is parsed as text and
cast by Arrow; any other text sends the batch to the row path. Where it is laxer,
the batch is checked after parsing: NaN/Infinity (which `orjson` refuses), UTF-8, the one-document-per-value
framing, and a null or blank value the converter would replace by a field's default. Only flat schemas of
long, int, double, boolean, string and timestamp-millis fields (nullable or not) take this path.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

from gobblin_py.api.batches import JsonLines
from gobblin_py.builtin.converters.arrow_fields import FlatField, flat_fields, iso_millis


class JsonArrowReader:
    """Parses a batch of JSON objects into a `pyarrow.RecordBatch` of `avro_schema` (see the module docstring);
    `supported` is False for a schema outside the flat types above, and `read` then always says None."""

    def __init__(self, avro_schema: dict[str, Any]) -> None:
        self.supported = False
        flat = flat_fields(avro_schema)
        if flat is None:  # not flat, no pyarrow, or a type Arrow cannot hold: the row path says why
            return
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.json as pj

        target, columns = flat
        parse_fields = [pa.field(arrow.name, pa.int64(), arrow.nullable) if c.kind == "timestamp" else arrow
                        for c, arrow in zip(columns, target)]
        self._pa, self._pc, self._pj = pa, pc, pj
        self.schema = target
        self._columns = columns
        self._parse = pj.ParseOptions(explicit_schema=pa.schema(parse_fields), unexpected_field_behavior="error",
                                      newlines_in_values=False)
        text = [pa.field(f.name, pa.string(), f.nullable) if c.kind == "timestamp" else f for c, f in zip(columns, parse_fields)]
        self._parse_text = pj.ParseOptions(explicit_schema=pa.schema(text), unexpected_field_behavior="error",
                                           newlines_in_values=False) if text != parse_fields else None
        self._text_first = False  # the last batch's timestamps were text: try that first
        self.supported = True

    def read(self, values: Sequence[bytes | None]) -> Any | None:
        """The batch of `values` (one JSON object each), or None: take the row path."""
        n = len(values)
        if not self.supported or not n:
            return None
        if isinstance(values, JsonLines):  # framed by the extractor, which checked the lines anyway
            data = values.data
        else:
            if None in values:
                return None
            data = b"\n".join(values)  # type: ignore[arg-type]  # no None: checked above
            # each value one line that opens and closes an object: a value can then make no row but exactly one
            if data.count(b"\n") != n - 1 or data.count(b"}\n{") != n - 1 or b"\r" in data:
                return None
            if not (data.startswith(b"{") and data.endswith(b"}")):
                return None
        pa = self._pa
        table = self._parsed(data)
        if table is None:  # a value the row path coerces, counts or refuses
            return None
        if table.num_rows != n:
            return None
        arrays = table.combine_chunks().columns
        out = []
        for col in self._columns:
            fixed = self._fix(col, arrays[col.index].chunk(0))  # n > 0 rows, combined: one chunk
            if fixed is None:
                return None
            out.append(fixed)
        batch = pa.RecordBatch.from_arrays(out, schema=self.schema)
        try:
            batch.validate(full=True)  # the JSON reader does not check UTF-8; orjson refuses what is not
        except pa.ArrowInvalid:
            return None
        return batch

    def _parsed(self, data: bytes) -> Any | None:
        """The batch as a table, its timestamps parsed as numbers or, failing that, as text (the kind that worked
        last is tried first); None when neither parses."""
        tries = [self._parse, self._parse_text] if self._parse_text is not None else [self._parse]
        if self._text_first:
            tries.reverse()
        read = self._pj.ReadOptions(use_threads=False, block_size=len(data) + 1)
        for options in tries:
            try:
                table = self._pj.read_json(io.BytesIO(data), read_options=read, parse_options=options)
            except (self._pa.ArrowException, ValueError):
                continue
            self._text_first = options is self._parse_text
            return table
        return None

    def _timestamps(self, array: Any, target: Any) -> Any | None:
        """A timestamp column as parsed: epoch milliseconds, or ISO text (`arrow_fields.iso_millis`); None for any
        other text, which the row path reads or refuses itself."""
        if not self._pa.types.is_string(array.type):
            return array.cast(target)
        return iso_millis(array, target)

    def _fix(self, col: FlatField, array: Any) -> Any | None:
        """`array` as the row path would have it, or None when a value needs the row path."""
        pc = self._pc
        has_default = col.has_default
        if array.null_count and has_default:
            return None  # the converter puts the default in place of a null or a missing value
        if col.kind == "double" and pc.any(pc.invert(pc.is_finite(array))).as_py():
            return None  # NaN or Infinity: not JSON to orjson, a bad record on the row path
        if col.kind == "timestamp":
            return self._timestamps(array, self.schema.field(col.index).type)
        if col.kind == "string" and col.nullable:
            blank = pc.equal(array, "")
            if pc.any(blank).as_py():  # a blank string of a nullable field is null (CSV has no null), or the default
                if has_default:
                    return None
                return pc.if_else(blank, self._pa.scalar(None, array.type), array)
        return array
