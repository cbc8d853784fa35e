"""Timing and judging changes: bench (one cell), pair (interleaved A/B), compare, history, what changed.

Nothing is imported here: each module is imported where it is used (``%load_ext`` stays cheap)."""
