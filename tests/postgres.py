"""The PostgreSQL server the benchmarks use (bench/postgres.py), for the Connect tests."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: bench/
from bench.postgres import PostgresServer, available  # noqa: E402

__all__ = ["PostgresServer", "available"]
