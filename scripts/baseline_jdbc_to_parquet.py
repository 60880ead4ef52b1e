"""The one-process pipeline a competent engineer writes for a PostgreSQL table → Parquet, which gobblin-py's jdbc
source is measured against: ADBC's PostgreSQL driver streams the query's result as Arrow record batches
(`cursor.fetch_record_batch()`, the binary COPY protocol underneath), each written as it comes by one
`pq.ParquetWriter` (zstd, as gobblin-py's parquet writer) into one file. The driver gives `numeric` as text (an
Arrow extension type over strings), where gobblin-py and dlt write decimals.

    .venv/bin/python scripts/baseline_jdbc_to_parquet.py postgresql://user@127.0.0.1:5432/db public.bench out.parquet

The password comes from $PGPASSWORD. Prints one JSON line: {"records": N, "seconds": S}.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from urllib.parse import quote, urlsplit, urlunsplit

import adbc_driver_postgresql.dbapi as pg_dbapi
import pyarrow.parquet as pq


def with_password(url: str, password: str) -> str:
    """`url` with the password put into its user part (ADBC takes no separate password)."""
    parts = urlsplit(url)
    user, host = parts.netloc.rsplit("@", 1)
    return urlunsplit(parts._replace(netloc=f"{user}:{quote(password, safe='')}@{host}"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("table")
    ap.add_argument("out")
    args = ap.parse_args()
    t0 = time.perf_counter()
    schema_name, table = args.table.split(".")
    count = 0
    with pg_dbapi.connect(with_password(args.url, os.environ["PGPASSWORD"])) as conn, conn.cursor() as cur:
        cur.execute(f'SELECT * FROM "{schema_name}"."{table}"')
        reader = cur.fetch_record_batch()
        with pq.ParquetWriter(args.out, reader.schema, compression="zstd") as writer:
            for batch in reader:
                writer.write_batch(batch)
                count += batch.num_rows
    print(json.dumps({"records": count, "seconds": time.perf_counter() - t0}))


if __name__ == "__main__":
    main()
