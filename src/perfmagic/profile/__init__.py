"""Profiles of one run of a cell: memory over time, sampling flame graphs, line timings.

Nothing is imported here: each module is imported where it is used (``%load_ext`` stays cheap)."""
