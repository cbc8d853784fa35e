"""Parallel scaling: the worker sweep, Amdahl/USL/Gustafson models, Little's law.

Nothing is imported here: each module is imported where it is used (``%load_ext`` stays cheap)."""
