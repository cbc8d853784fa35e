"""Estimating the full run from small runs: the cost models, the runner, the gate.

Nothing is imported here: each module is imported where it is used (``%load_ext`` stays cheap)."""
