"""Tables of simulated asynchronous-pipeline modes (pure functions of the results)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from simulators.async_gnn_model.simulation import SimulationResult


def summary_table(results: Sequence[SimulationResult]) -> pd.DataFrame:
    """One row per mode (scalars of the summaries; per-worker utilization left out), with the speedup over the
    first mode."""
    rows = [{k: v for k, v in r.summary.items() if k != "worker_utilization"} for r in results]
    table = pd.DataFrame(rows)
    table["speedup"] = table["makespan_s"].iloc[0] / table["makespan_s"]
    return table


def tasks_table(results: Sequence[SimulationResult]) -> pd.DataFrame:
    """Every task of every mode (the Gantt data), tidy: ``mode`` first."""
    return pd.concat([r.tasks.assign(mode=r.mode) for r in results], ignore_index=True)[
        ["mode", "phase", "iteration", "layer", "stage", "partition", "worker", "start", "end"]]


__all__ = ["summary_table", "tasks_table"]
