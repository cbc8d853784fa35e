"""Is the training loop waiting for data: the DataLoader check.

Nothing is imported here: each module is imported where it is used (``%load_ext`` stays cheap)."""
