"""``forensics fleet``: :func:`forensics.analysis.analyze` run over many bundles on Dask, with the
results in DuckDB (and Parquet) for SQL.

- :mod:`forensics.fleet.tasks`: which inputs a PATH stands for, and one input analysed into plain rows
  (no Dask, no DuckDB: the function the workers run);
- :mod:`forensics.fleet.engine`: the Dask side (a local cluster of processes, or a scheduler address);
- :mod:`forensics.fleet.store`: the DuckDB tables, the Parquet export and the SQL summary;
- :mod:`forensics.fleet.replay`: a fleet of bundles replayed from recorded samples (tests, bench, demos);
- :mod:`forensics.fleet.cli`: the subcommand.
"""
