"""The advisor: ``%perf next`` proposes the next experiment from the ledger, in the method's order,
with its expected gain bounded by measurement, and checks its predictions afterwards."""

from .next import AdvisorError, check_predictions, next_step
from .result import LEVELS, Candidate, NextStep, PredictionCheck

__all__ = ["AdvisorError", "Candidate", "LEVELS", "NextStep", "PredictionCheck", "check_predictions", "next_step"]
