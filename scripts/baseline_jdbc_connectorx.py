"""The one-process pipeline a competent engineer writes for a MySQL/MariaDB table → Parquet, which gobblin-py's jdbc
source is measured against on MariaDB (where ADBC has no driver): ConnectorX reads the whole table in Rust into one
Arrow table (`connectorx.read_sql(url, query, return_type="arrow")`, one connection, MySQL's binary protocol), written
by `pq.write_table` (zstd, as gobblin-py's parquet writer) into one file. Decimals come as decimal128(38, 10).

    .venv/bin/python scripts/baseline_jdbc_connectorx.py mysql://user@127.0.0.1:3306/db db.bench out.parquet

The password comes from $MYSQL_PWD. Prints one JSON line: {"records": N, "seconds": S}.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from urllib.parse import quote, urlsplit, urlunsplit

import connectorx
import pyarrow.parquet as pq


def with_password(url: str, password: str) -> str:
    """`url` with the password put into its user part (ConnectorX takes no separate password)."""
    parts = urlsplit(url)
    user, host = parts.netloc.rsplit("@", 1)
    return urlunsplit(parts._replace(netloc=f"{user}:{quote(password, safe='')}@{host}"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("url", help="mysql://user@host:port/database (mariadb:// is taken as mysql://)")
    ap.add_argument("table", help="database.table")
    ap.add_argument("out")
    args = ap.parse_args()
    t0 = time.perf_counter()
    schema_name, table = args.table.split(".")
    url = with_password(args.url.replace("mariadb://", "mysql://", 1), os.environ["MYSQL_PWD"])
    arrow = connectorx.read_sql(url, f"SELECT * FROM `{schema_name}`.`{table}`", return_type="arrow")
    pq.write_table(arrow, args.out, compression="zstd")
    print(json.dumps({"records": arrow.num_rows, "seconds": time.perf_counter() - t0}))


if __name__ == "__main__":
    main()
