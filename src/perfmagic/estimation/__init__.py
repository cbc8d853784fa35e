"""Estimating the full run from small runs: ``estimate`` (the driver), ``measure`` (sizes and blocks run),
``runner`` (one run, the full run), ``fit`` and ``costmodel`` (the prediction), ``gate``, ``result``.

Nothing is imported here: each module is imported where it is used (``%load_ext`` stays cheap)."""
