"""What every part of the client core stands on.

- ``errors``: the client's one exception hierarchy (each error says what to do next);
- ``paths``: where SparkSync keeps its files (platformdirs, or all under ``SPARKSYNC_HOME``);
- ``file_lock``: an exclusive lock between SparkSync processes;
- ``listeners``: a thread-safe list of callbacks;
- ``units``: formatting of bytes, bit rates and tokens/s.
"""
