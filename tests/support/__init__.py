"""This project's own test helpers (brokers, servers, clusters, example jobs), imported as `support`: tests/conftest.py
puts tests/ on sys.path. What a plugin author reuses is gobblin_py.testing."""
