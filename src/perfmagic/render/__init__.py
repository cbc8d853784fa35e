"""Turning results into what a person reads: units, figures, mime bundles, the flame graph's HTML.

Nothing is imported here: each module is imported where it is used (``%load_ext`` stays cheap)."""
