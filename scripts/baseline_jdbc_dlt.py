"""The tool a user would pick instead of gobblin-py for a PostgreSQL or MySQL/MariaDB table → Parquet files: a dlt
pipeline with the `sql_table` source on ConnectorX's backend (the table read in Rust into Arrow) into the `filesystem`
destination, loader file format parquet, dlt's defaults otherwise (snappy; numeric as decimal128(38, 10)).

    DLT_DATA_DIR=/tmp/x/dlt RUNTIME__DLTHUB_TELEMETRY=false \\
        .venv/bin/python scripts/baseline_jdbc_dlt.py postgresql://user@127.0.0.1:5432/db public.bench OUT_DIR
    ... scripts/baseline_jdbc_dlt.py mysql://user@127.0.0.1:3306/db db.bench OUT_DIR     (mariadb:// too)

SQLAlchemy reflects the table through psycopg 3 (PostgreSQL) or PyMySQL (MySQL/MariaDB, whose "schema" is the
database); dlt hands ConnectorX the same URL without the driver part. The password comes from $PGPASSWORD
(PostgreSQL) or $MYSQL_PWD (MySQL/MariaDB); the files land in OUT_DIR/bench_dlt/<table>/, dlt's own state beside them
(OUT_DIR/bench_dlt/_dlt_*) and under $DLT_DATA_DIR. Prints one JSON line: {"records": N, "seconds": S}.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import dlt
from dlt.sources.credentials import ConnectionStringCredentials
from dlt.sources.sql_database import sql_table


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("table")
    ap.add_argument("out", type=Path)
    args = ap.parse_args()
    t0 = time.perf_counter()
    schema_name, table = args.table.split(".")
    scheme, rest = args.url.split("://", 1)
    if scheme in ("mysql", "mariadb"):
        url, password = f"mysql+pymysql://{rest}", os.environ["MYSQL_PWD"]
    else:
        url, password = args.url.replace("postgresql://", "postgresql+psycopg://", 1), os.environ["PGPASSWORD"]
    credentials = ConnectionStringCredentials(url)
    credentials.password = password
    pipeline = dlt.pipeline(pipeline_name="bench_dlt", dataset_name="bench_dlt",
                            destination=dlt.destinations.filesystem(bucket_url=str(args.out.resolve())))
    pipeline.run(sql_table(credentials=credentials, table=table, schema=schema_name, backend="connectorx"),
                 loader_file_format="parquet")
    count = pipeline.last_trace.last_normalize_info.row_counts.get(table, 0)
    print(json.dumps({"records": count, "seconds": time.perf_counter() - t0}))


if __name__ == "__main__":
    main()
