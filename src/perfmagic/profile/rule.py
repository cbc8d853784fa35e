"""The rule that names a function (:mod:`.where`) or a torch op (:mod:`.where_ops`) in a differential
profile: its Δ's interval, a bootstrap over the pairs, excludes 0 and |Δ| is not below a floor."""

from __future__ import annotations

CONFIDENCE = 0.99  # a function (op) is named when this interval of its Δ excludes 0 ...
FLOOR = 0.02       # ... and |Δ| ≥ this share of A's time per call (below it: sampling resolution)
RESAMPLES = 2000   # bootstrap resamples of the pairs

__all__ = ["CONFIDENCE", "FLOOR", "RESAMPLES"]
