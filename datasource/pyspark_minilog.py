"""Makes `format("minilog")` work with no registration line.

pyspark looks for top-level modules named `pyspark_*` that define `DefaultSource`; setup.py
installs this file as the top-level module `pyspark_minilog`.
"""
from minilog.datasource.source import MinilogDataSource as DefaultSource

__all__ = ["DefaultSource"]
