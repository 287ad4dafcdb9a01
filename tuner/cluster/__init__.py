"""Running sweeps on a Ray cluster as Ray Jobs: the cluster's token, the Jobs API, and what a
submitted sweep's driver needs shipped with it. The CLI's ``tuner submit``, ``logs``, ``stop``
and ``resume --submit`` are built on these (``tuner.cli.submit_cmd``)."""
