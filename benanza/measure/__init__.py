"""Measurement: build a generated project (runner, build_cache), run its executables on this GPU
(runner) or on a Dask cluster (cluster, cluster_worker), and say which system measured (system).
Results go to a ``runner.Sink``; the database's is ``benanza.store.db.DatabaseSink``."""
