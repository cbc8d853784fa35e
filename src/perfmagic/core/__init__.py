"""The measuring core every analysis shares: cells (source -> runnable), the subject and its sampling
blocks, device sync, cache flush, environment, load and usable cores, thread pools, statistics, peak memory,
the reference workload.

Nothing is imported here: each module is imported where it is used (``%load_ext`` stays cheap)."""
