"""The roofline: this machine's measured ceilings, FLOP/byte counting, and where a cell sits.

Nothing is imported here: each module is imported where it is used (``%load_ext`` stays cheap)."""
