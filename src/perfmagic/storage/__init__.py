"""The run ledger: an SQLite file beside the notebook, and one Ledger per notebook per kernel.

Nothing is imported here: each module is imported where it is used (``%load_ext`` stays cheap)."""
