"""The hand-written pipeline gobblin-py's jdbc source is measured against: one process, psycopg 3
`COPY (SELECT … ORDER BY watermark, id) TO STDOUT (FORMAT BINARY)` parsed by psycopg's C loaders in its row
batches → fastavro, one deflate Avro file.

    .venv/bin/python scripts/baseline_jdbc_to_avro.py postgresql://user@127.0.0.1:5432/db public.bench out.avro

The password comes from $PGPASSWORD. Prints one JSON line: {"records": N, "seconds": S}.
"""

from __future__ import annotations

import argparse
import json
import time

import fastavro
import psycopg
from psycopg import sql

SCHEMA = {"type": "record", "name": "bench", "fields": [
    {"name": "id", "type": "long"},
    {"name": "updated_at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "customer", "type": ["null", "int"], "default": None},
    {"name": "amount", "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}], "default": None},
    {"name": "qty", "type": ["null", "int"], "default": None},
    {"name": "price", "type": ["null", "double"], "default": None},
    {"name": "status", "type": ["null", "string"], "default": None},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "flag", "type": ["null", "boolean"], "default": None},
    {"name": "day", "type": ["null", {"type": "int", "logicalType": "date"}], "default": None},
]}
TYPES = ["int8", "timestamptz", "int4", "numeric", "int2", "float8", "text", "varchar", "bool", "date"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("table")
    ap.add_argument("out")
    args = ap.parse_args()
    t0 = time.perf_counter()
    names = [f["name"] for f in SCHEMA["fields"]]
    schema = fastavro.parse_schema(SCHEMA)
    schema_name, table = args.table.split(".")
    query = sql.SQL("COPY (SELECT {} FROM {} ORDER BY updated_at, id) TO STDOUT (FORMAT BINARY)").format(
        sql.SQL(", ").join(map(sql.Identifier, names)), sql.Identifier(schema_name, table))
    count = 0

    def records():
        nonlocal count
        with psycopg.connect(args.url) as conn, conn.cursor() as cur, cur.copy(query) as copy:
            copy.set_types(TYPES)
            for row in copy.rows():
                count += 1
                yield dict(zip(names, row))

    with open(args.out, "wb") as f:
        fastavro.writer(f, schema, records(), codec="deflate")
    print(json.dumps({"records": count, "seconds": time.perf_counter() - t0}))


if __name__ == "__main__":
    main()
