"""The figure jobs, one module each (its typed ``run``, plots, claims, table specs and ``FIGURE``), registered by one
line of :data:`experiments.plugins.FIGURE_TABLE`. They are independent of each other (an import-linter contract on
``experiments.figures.*``); what they share lives beside this package (:mod:`experiments.common`,
:mod:`experiments.style`, :mod:`experiments.report`, :mod:`experiments.compare`, :mod:`experiments.pipeline_runs`).
Each runs as ``python -m experiments.figures.<module>``.
"""
