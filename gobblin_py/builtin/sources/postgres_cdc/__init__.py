"""The `postgres_cdc` source: PostgreSQL change data capture through a logical replication slot (see `source.py`)."""
