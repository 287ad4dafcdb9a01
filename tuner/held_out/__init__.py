"""A sweep's answer checked on held-out seeds: its best configs retrained on seeds it never used,
as a follow-on sweep, with robust statistics (``ExperimentAnalysis.validate``, ``tuner validate``)."""

from tuner.held_out.plan import Candidate, ValidationPlan
from tuner.held_out.report import ConfigReport, ValidationReport

__all__ = ["Candidate", "ConfigReport", "ValidationPlan", "ValidationReport"]
