"""A sweep's answer checked on held-out seeds: its best configs retrained on seeds it never used,
as a follow-on sweep, with robust statistics (``ExperimentAnalysis.validate``, ``tuner validate``).

The package itself imports nothing: ``import tuner`` reaches ``tuner.held_out.runner`` from every
process, a trial's actor included, which has no use for the statistics (numpy, SciPy) of
``tuner.held_out.report``; the plan and the report are imported from their modules.
"""
