"""Validation of the disk-system epoch simulator (issue 33, item 3): predicted against measured epoch times of real
disk node-classification and link-prediction runs.

Usage::

    python -m experiments.measure.disk_simulation [--runs DIR] [--out DIR] [--tasks nc lp] [--no-run]
    python -m experiments.measure.disk_simulation --recorded DIR [DIR ...] [--out DIR]

Runs (through the harness, finished runs skipped) per task a calibration grid and a held-out grid:
``experiments/specs/disk_simulation_{nc,lp}_calibration.yaml`` (one run) and ``disk_simulation_{nc,lp}.yaml``
(8 configurations: two policies x prefetch on/off x two ``p`` at ``c = 4``, each run twice, ``-r0`` and ``-r1``).
The simulator (:mod:`simulators.disk_epoch_model`) is calibrated on the calibration run's ``state`` and ``epoch``
records and the work of its plans, then predicts every held-out run from its plans and its store's sizes only.

Per held-out run: the measured and predicted mean warm epoch time (epochs 1 on; epoch 0 fills the buffer and warms
up), the signed relative error, the bytes the plan says are read against the bytes the run recorded, the
simulation's speed, and the *replay* error: the same prediction with the costs fitted on the run's own records
(what is left when the load on the machine during the calibration run and during this run is the same: the
model's own error apart from the drift of the machine's speed between runs), and the *load-conditioned* error:
the prediction with the costs slowed by the ratio of the cores other processes left to the calibration run and to
this run (processor sharing, :func:`simulators.disk_epoch_model.load_factor`; the harness records the foreign load
of every epoch; nothing is fitted), and the *previous-run* error: calibrated instead on the run recorded just before
(another configuration, or the calibration run for the first; made under nearly the same load). Summary per task
and over both: median and 90th-percentile absolute error and the mean signed error, each with a 95 % bootstrap
interval (:func:`suite.stats.bootstrap_interval`), next to the measured runs' own run-to-run spread (the relative
difference of a configuration's two runs' warm epoch times, halved: each run's deviation from the pair's mean).
Writes ``disk_simulation_runs.csv``, ``disk_simulation_summary.csv`` and ``disk_simulation_costs.csv`` into
``--out`` (default ``out/results``).

``--recorded DIR ...``: no run is made; the simulator is validated on the disk runs a disk experiment already
recorded in those folders (e.g. ``experiments.figures.disk_nc``'s and ``disk_lp``'s run folders;
:func:`validate_recorded`): per group (dataset, task, encoder) the runs designated by a rule fixed in advance
(:func:`designated_calibration`: seed 0, prefetch on, not pipelined, ``c = p / 4``, finest ``p``; node
classification: the ``sequential`` run and the ``dispersed`` run of the same ``p`` and ``c``, pooled; link
prediction: the ``comet`` run) calibrate, every other disk run of the group is predicted; the same columns and
summary (the spread over a configuration's seeds), per task, over all and per group; a group whose pooled compute
fit is still rank-deficient is flagged in the costs table, on its runs' rows and in the summary. Writes
``disk_simulation_recorded_{runs,summary,costs}.csv``.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from experiments.common import REPO_ROOT, SPECS
from simulators.disk_epoch_model import (DiskCosts, PassWork, StateSampledEdges, StoreSizes, calibrate_pooled,
                                         load_factor, plan_work, predict)
from simulators.disk_epoch_model import compute_rank as features_rank
from suite.config import RunSpec, load_spec
from suite.errors import ConfigError, SuiteError
from suite.recorder import read_records, read_summary
from suite.stats import bootstrap_interval

TASKS = {"nc": "disk_simulation_nc", "lp": "disk_simulation_lp"}
WARM_FROM = 1
EDGE_BYTES = 24  # int64 (src, rel, dst) per edge in the bucket file
ADAGRAD_COPIES = 1  # optimizer state stored beside each embedding
MACHINE_CORES = float(os.cpu_count() or 1)


@dataclass(frozen=True)
class RunInputs:
    """What the simulator needs of one recorded run: its spec, the work of its passes and its records."""

    run_dir: Path
    spec: RunSpec
    work: list[PassWork]
    states: list[dict[str, Any]]
    epochs: list[dict[str, Any]]

    @property
    def options(self):
        from systems.disk.disk_system import DiskOptions

        return DiskOptions.model_validate(self.spec.system.options)

    @property
    def keeps_resident(self) -> bool:
        """Node classification keeps partitions resident from one pass to the next; link prediction does not."""
        return self.spec.training.task != "link_prediction"


# ---------------------------------------------------------------------------------------------- plans and sizes
def partitioned(spec: RunSpec):
    """The run's partitioned store (the disk system's cached copy)."""
    from suite.datasets import open_dataset
    from systems.disk.disk_system import DiskOptions, partitioned_store

    options = DiskOptions.model_validate(spec.system.options)
    return partitioned_store(open_dataset(spec.dataset), options.num_partitions, options.order,
                             options.order_seed(spec.seed))


def run_plans(spec: RunSpec, pstore) -> list:
    """The plans of the run's training epochs, from the policy API (what the disk system executes)."""
    import torch

    from systems.disk.disk_system import DiskOptions
    from systems.disk.policies import PolicySpec, make_plan
    from systems.tasks.node_classification import labeled

    options = DiskOptions.model_validate(spec.system.options)
    common = dict(num_partitions=options.num_partitions, capacity=options.buffer_capacity,
                  fine_to_coarse_ratio=options.fine_to_coarse_ratio)
    if spec.training.task == "link_prediction":
        policy_spec = PolicySpec(task="link_prediction", **common)
    else:
        offsets = np.asarray(pstore.array("partition_offsets"))
        train = labeled(pstore.split("train").to(torch.int64), pstore.labels.to(torch.int64)).numpy()
        policy_spec = PolicySpec(task="node_classification",
                                 train_partitions=np.searchsorted(offsets, train, "right") - 1, **common)
    return [make_plan(options.policy, policy_spec, seed=spec.seed, epoch=e) for e in range(spec.training.epochs)]


def store_sizes(spec: RunSpec, pstore) -> StoreSizes:
    """Bytes of every partition (features; or embeddings + Adagrad state) and edges of every bucket."""
    from suite.data.partition import PartitionLayout
    from systems.disk.disk_system import DiskOptions

    options = DiskOptions.model_validate(spec.system.options)
    rows = np.diff(np.asarray(pstore.array("partition_offsets"))).astype(np.float64)
    if spec.training.task == "link_prediction":
        row_bytes = spec.model.embedding_dim * 4 * (1 + ADAGRAD_COPIES)
    else:
        row_bytes = pstore.feature_dim * np.dtype(pstore.metadata["files"]["features"]["dtype"]).itemsize
    return StoreSizes(partition_bytes=rows * row_bytes,
                      bucket_edges=PartitionLayout.from_store(pstore).bucket_sizes().numpy(),
                      edge_bytes=EDGE_BYTES, coalesce_rows=options.coalesce_bytes // EDGE_BYTES,
                      learnable=spec.training.task == "link_prediction")


WORKLOAD_SEED = 0
"""Seed of the workload count's batches (:func:`state_sampled_edges`): the count is the work of a state's examples in
its buffer, the same for every seed of a run."""


@dataclass(frozen=True)
class _WorkloadGraph:
    """What the workload count of a partitioned store needs: the sampler's graph cut to the rows a sample can expand
    (the nodes within ``L - 1`` hops of the training nodes), the partition of every neighbour in it, the training
    nodes in plan order, the sampler and its fanouts."""

    graph: Any
    source_partition: Any
    train: Any
    sampler_class: Any
    fanouts: tuple[int, ...]
    replace: bool


def _workload_key(spec: RunSpec) -> str:
    """What the workload graph of a run depends on: its partitioned store, sampler and fanouts."""
    from systems.disk.disk_system import DiskOptions

    options = DiskOptions.model_validate(spec.system.options)
    return json.dumps([spec.dataset.model_dump(mode="json"), options.num_partitions, options.order,
                       options.order_seed(spec.seed), spec.sampler.model_dump(mode="json"), list(spec.model.fanouts)],
                      sort_keys=True)


def _with_edges(graph, kept):
    """``graph`` (a :class:`~systems.sampling.sampler.SamplingGraph`) with only the edges ``kept`` (a mask over its
    ``indices``): the same rows, each with its kept edges in order."""
    import torch

    from systems.sampling.sampler import SamplingGraph

    counts = torch.cat([torch.zeros(1, dtype=torch.int64), kept.cumsum(0)])
    return SamplingGraph(counts[graph.indptr], graph.indices[kept])


@functools.lru_cache(maxsize=4)
def _workload_graph(key: str) -> _WorkloadGraph:
    """:class:`_WorkloadGraph` of a :func:`_workload_key` (loaded once per process and store)."""
    import torch

    from suite.config import DatasetSpec, SamplerSpec
    from suite.datasets import open_dataset
    from suite.registry import SAMPLERS
    from systems.disk.disk_system import partitioned_store
    from systems.sampling.sampler import SamplingGraph
    from systems.tasks.node_classification import labeled

    dataset, num_partitions, order, order_seed, sampler_spec, fanouts = json.loads(key)
    sampler_spec = SamplerSpec.model_validate(sampler_spec)
    pstore = partitioned_store(open_dataset(DatasetSpec.model_validate(dataset)), num_partitions, order, order_seed)
    whole = SamplingGraph.from_store(pstore, sampler_spec.direction)
    train = labeled(pstore.split("train").to(torch.int64), pstore.labels.to(torch.int64))
    expanded = torch.zeros(whole.num_nodes, dtype=torch.bool)
    expanded[train] = True
    degrees = whole.indptr.diff()
    for _ in range(len(fanouts) - 1):  # a sample of L hops expands the rows of the nodes within L - 1 hops
        rows = torch.repeat_interleave(expanded, degrees)
        expanded[whole.indices[rows]] = True
    graph = _with_edges(whole, torch.repeat_interleave(expanded, degrees))
    offsets = torch.as_tensor(np.asarray(pstore.array("partition_offsets")), dtype=torch.int64)
    source_partition = torch.searchsorted(offsets, graph.indices, right=True) - 1
    return _WorkloadGraph(graph, source_partition, train, SAMPLERS.get(sampler_spec.name), tuple(fanouts),
                          sampler_spec.replace)


def state_sampled_edges(spec: RunSpec) -> StateSampledEdges | None:
    """The workload count of a node-classification run (None for link prediction): for every state a plan enters,
    the edges the run's sampler (its fanouts) samples from the state's training examples, in batches of the run's
    size, in the graph the state's buffer holds (the in-edges whose source lies in a partition it holds). Work
    counts only: nothing is timed. A state met again (the same partitions and examples) is counted once."""
    if spec.training.task == "link_prediction":
        return None
    import torch

    work = _workload_graph(_workload_key(spec))
    batch_size = spec.training.batch_size
    counted: dict[tuple, float] = {}

    def count(num_partitions: int, members: np.ndarray, examples) -> float:
        held = torch.zeros(num_partitions, dtype=torch.bool)
        held[torch.as_tensor(members, dtype=torch.int64)] = True
        sampler = work.sampler_class(_with_edges(work.graph, held[work.source_partition]), work.fanouts,
                                     replace=work.replace)
        return float(sum(work.sampler_class.counts(sampler.timed_sample(batch, WORKLOAD_SEED + b)).sampled_edges
                         for b, batch in enumerate(examples.split(batch_size))))

    def sampled_edges(plan, entered: np.ndarray) -> np.ndarray:
        node_state = torch.as_tensor(plan.node_state, dtype=torch.int64)
        out = []
        for state in entered.tolist():
            members = np.unique(plan.state(state)).astype(np.int64)
            examples = work.train[node_state == state]
            key = (members.tobytes(), examples.numpy().tobytes())
            if key not in counted:
                counted[key] = count(plan.num_partitions, members, examples)
            out.append(counted[key])
        return np.asarray(out, dtype=np.float64)

    return sampled_edges


def spec_work(spec: RunSpec) -> list[PassWork]:
    """The work of every training pass of a disk run spec, from its plans, its partitioned store's sizes (the
    store is partitioned, and cached, if no run did it yet) and, for node classification, its workload count
    (:func:`state_sampled_edges`)."""
    if spec.system.name != "disk":
        raise ConfigError(f"system.name: {spec.system.name!r}; the simulation is of the disk system")
    pstore = partitioned(spec)
    return plan_work(run_plans(spec, pstore), store_sizes(spec, pstore), spec.training.batch_size,
                     keeps_resident=spec.training.task != "link_prediction",
                     sampled_edges=state_sampled_edges(spec))


def load_run(run_dir: Path) -> RunInputs:
    """A recorded disk run's spec, the work of its plans and its ``state`` / ``epoch`` records."""
    if not (run_dir / "config.yaml").is_file():
        raise ConfigError(f"{run_dir}: no config.yaml (not a recorded run)")
    spec = load_spec(run_dir / "config.yaml")
    records = read_records(run_dir)
    return RunInputs(run_dir, spec, spec_work(spec), [r for r in records if r.get("kind") == "state"],
                     [r for r in records if r.get("kind") == "epoch"])


# ---------------------------------------------------------------------------------------------- validation
def _as_runs(runs: RunInputs | Sequence[RunInputs]) -> list[RunInputs]:
    return [runs] if isinstance(runs, RunInputs) else list(runs)


def calibrate_on(runs: RunInputs | Sequence[RunInputs]) -> DiskCosts:
    """The costs fitted on a calibration run, or on several pooled
    (:func:`~simulators.disk_epoch_model.calibrate_pooled`)."""
    runs = _as_runs(runs)
    return calibrate_pooled([(run.states, run.epochs, run.work) for run in runs],
                            prefetch=[run.options.prefetch for run in runs], warm_from=WARM_FROM,
                            compute_threads=float(np.mean([compute_threads(run) for run in runs])))


def compute_threads(run: RunInputs) -> float:
    """The threads a recorded run computed with (its summary's thread budget; 1 where it is not recorded): the
    disk system gives the prefetch thread a core of its own, so a run without prefetch computes with one more."""
    return float(((read_summary(run.run_dir) or {}).get("threads") or {}).get("compute") or 1)


FULL_COMPUTE_RANK = 3
"""Features of the compute fit: a constant, batches, examples (node classification: sampled edges)."""


def compute_rank(runs: RunInputs | Sequence[RunInputs]) -> int:
    """Rank of the compute fit's features on the calibration runs' warm states (a constant, batches, examples or
    sampled edges; :func:`simulators.disk_epoch_model.compute_rank`): below :data:`FULL_COMPUTE_RANK`, the runs do
    not tell per-state, per-batch and per-example compute apart (a run of one state per epoch and the same examples
    every epoch), and the non-negative fit puts the compute on some of them."""
    return features_rank([run.work for run in _as_runs(runs)], WARM_FROM)


def foreign_cores(run: RunInputs) -> float:
    """Mean cores other processes used during the run's warm epochs (recorded per epoch by the harness)."""
    values = [float(r["foreign_cores"]) for r in run.epochs
              if int(r["epoch"]) >= WARM_FROM and r.get("foreign_cores") is not None]
    return float(np.mean(values)) if values else float("nan")


def measured_warm(run: RunInputs) -> tuple[list[int], float, float, float]:
    """A recorded run's warm epochs (from :data:`WARM_FROM` on), their mean measured epoch time, and the bytes its
    plans say those epochs read against the bytes it recorded reading."""
    measured = {int(r["epoch"]): float(r["epoch_time_s"]) for r in run.epochs}
    warm = [e for e in sorted(measured) if WARM_FROM <= e < len(run.work)]
    if not warm:
        raise ConfigError(f"{run.run_dir}: no warm epoch recorded (epochs from {WARM_FROM} on)")
    recorded_bytes = sum(float(r.get("io_read_bytes", 0)) for r in run.epochs if int(r["epoch"]) in warm)
    planned_bytes = sum(float(run.work[e].read_bytes.sum()) for e in warm)
    return warm, float(np.mean([measured[e] for e in warm])), planned_bytes, recorded_bytes


def compare(run: RunInputs, costs: DiskCosts, calibration_foreign_cores: float | None = None,
            cores: float = MACHINE_CORES) -> dict[str, Any]:
    """One held-out run: measured and predicted mean warm epoch time, error, bytes, simulation speed; with the
    calibration run's foreign load, also the prediction for this run's own foreign load (``load_error``). The
    costs are first rescaled to the run's compute threads (:meth:`DiskCosts.with_compute_threads`)."""
    options = run.options
    costs = costs.with_compute_threads(compute_threads(run))
    prediction = predict(run.work, costs, prefetch=options.prefetch, keeps_resident=run.keeps_resident)
    warm, measured_s, planned_bytes, recorded_bytes = measured_warm(run)
    predicted_s = float(np.mean(prediction.epoch_time_s[warm]))
    load = {}
    if (calibration_foreign_cores is not None and math.isfinite(calibration_foreign_cores)
            and math.isfinite(foreign_cores(run))):
        factor = load_factor(calibration_foreign_cores, foreign_cores(run), cores)
        loaded = predict(run.work, costs.slowed(factor), prefetch=options.prefetch, keeps_resident=run.keeps_resident)
        loaded_s = float(np.mean(loaded.epoch_time_s[warm]))
        load = {"load_factor": factor, "load_predicted_epoch_s": loaded_s, "load_error": loaded_s / measured_s - 1.0}
    return {
        "task": run.spec.training.task, "run_id": run.run_dir.name, "name": run.spec.name,
        "policy": options.policy, "num_partitions": options.num_partitions, "buffer_capacity": options.buffer_capacity,
        "prefetch": options.prefetch, "warm_epochs": len(warm), "measured_epoch_s": measured_s,
        "predicted_epoch_s": predicted_s, "predicted_serial_epoch_s": float(np.mean(prediction.serial_s[warm])),
        "error": predicted_s / measured_s - 1.0, "planned_read_bytes": planned_bytes,
        "recorded_read_bytes": recorded_bytes, "states": prediction.states, "simulation_s": prediction.simulation_s,
        "states_per_s": prediction.states_per_s,
        "batches_per_s": float(sum(w.batches.sum() for w in run.work)) / prediction.simulation_s,
        "foreign_cores": foreign_cores(run), **load,
    }


def started_at(run: RunInputs) -> float:
    """Wall-clock time of the run's first epoch record (runs made one after another are ordered by it)."""
    return min((float(r["time"]) for r in run.epochs if "time" in r), default=math.inf)


def config_key(row: pd.Series) -> tuple:
    """A held-out configuration (the repeats -r0, -r1, or the seeds of a recorded experiment, share it; recorded
    runs also by their group and whether they are pipelined)."""
    return (row["task"], row.get("group"), row["policy"], row["num_partitions"], row["buffer_capacity"],
            row["prefetch"], row.get("pipelined"))


def run_to_run_spread(runs: pd.DataFrame) -> pd.Series:
    """Per run, its relative deviation from the mean warm epoch time of its configuration's runs (NaN alone)."""
    keys = runs.apply(config_key, axis=1)
    mean = runs.groupby(keys)["measured_epoch_s"].transform("mean")
    count = runs.groupby(keys)["measured_epoch_s"].transform("count")
    return (runs["measured_epoch_s"] / mean - 1.0).where(count > 1)


def summarize(runs: pd.DataFrame) -> pd.DataFrame:
    """Median and 90th-percentile absolute error and mean signed error (95 % bootstrap intervals), with the
    run-to-run spread, per task and over both."""
    rows = []
    for task, group in [*runs.groupby("task"), ("all", runs)]:
        errors = group["error"].to_numpy()
        spread = group["run_to_run"].dropna().abs().to_numpy()
        row = {"task": task, "runs": len(group)}
        for name, values, statistic in (
                ("median_abs_error", np.abs(errors), np.median),
                ("p90_abs_error", np.abs(errors), lambda x, axis=None: np.percentile(x, 90, axis=axis)),
                ("mean_error", errors, np.mean),
                ("median_abs_load_error", np.abs(group["load_error"].to_numpy()), np.median),
                ("p90_abs_load_error", np.abs(group["load_error"].to_numpy()),
                 lambda x, axis=None: np.percentile(x, 90, axis=axis)),
                ("mean_load_error", group["load_error"].to_numpy(), np.mean),
                ("median_abs_replay_error", np.abs(group["replay_error"].to_numpy()), np.median),
                ("median_abs_previous_run_error", np.abs(group["previous_run_error"].to_numpy()), np.median),
                ("p90_abs_previous_run_error", np.abs(group["previous_run_error"].to_numpy()),
                 lambda x, axis=None: np.percentile(x, 90, axis=axis)),
                ("mean_previous_run_error", group["previous_run_error"].to_numpy(), np.mean),
                ("median_abs_run_to_run", spread, np.median),
                ("p90_abs_run_to_run", spread, lambda x, axis=None: np.percentile(x, 90, axis=axis))):
            interval = bootstrap_interval(values, statistic)
            row.update({name: interval.estimate, f"{name}_ci_low": interval.low, f"{name}_ci_high": interval.high})
        if "calibration_compute_rank" in group:
            row["rank_deficient_runs"] = int((group["calibration_compute_rank"] < FULL_COMPUTE_RANK).sum())
        row["batches_per_s"] = float(group["batches_per_s"].median())
        if "states_per_s" in group:
            row["states_per_s"] = float(group["states_per_s"].median())
        rows.append(row)
    return pd.DataFrame(rows)


def validate(runs_root: Path, tasks: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Calibrate per task on its calibration run, predict its held-out runs; ``(runs, summary, costs)``."""
    from suite.grid import expand_grid

    rows, costs_rows = [], []
    for task in tasks:
        calibration = expand_grid(SPECS / f"{TASKS[task]}_calibration.yaml")[0]
        calibration_run = load_run(runs_root / calibration.run_id)
        costs, load = calibrate_on(calibration_run), foreign_cores(calibration_run)
        costs_rows.append({"task": task, "calibration_run": calibration.run_id, "foreign_cores": load,
                           **costs.as_dict()})
        held_out = sorted((load_run(runs_root / spec.run_id) for spec in expand_grid(SPECS / f"{TASKS[task]}.yaml")),
                          key=started_at)
        previous = calibration_run
        for run in held_out:
            rows.append({**compare(run, costs, load), "replay_error": compare(run, calibrate_on(run))["error"],
                         "previous_run_error": compare(run, calibrate_on(previous))["error"]})
            previous = run
    runs = pd.DataFrame(rows)
    runs["run_to_run"] = run_to_run_spread(runs)
    return runs, summarize(runs), pd.DataFrame(costs_rows)


# ---------------------------------------------------------------------------------------------- recorded runs
CALIBRATION_POLICIES = {"node_classification": ("sequential", "dispersed"), "link_prediction": ("comet",)}
"""The policies of a group's designated calibration runs, pooled (:func:`designated_calibration`): for node
classification the sequential run (one state per epoch, the same batches every epoch: alone it does not tell the
per-state compute from the per-batch and per-example compute) and the dispersed run of the same ``p`` and ``c``
(several states per epoch of varying examples); for link prediction the COMET run alone (its states' examples vary:
its compute fit has full rank)."""
NO_CALIBRATION = "no designated calibration run in its group"


def dataset_label(spec: RunSpec) -> str:
    """The dataset a run trains on, as a label: the preset (else the name; an existing store's folder name) and the
    generator overrides."""
    name = spec.dataset.preset or spec.dataset.name
    if spec.dataset.name == "store" and spec.dataset.root:
        name = f"{name}:{Path(spec.dataset.root).name}"
    params = ",".join(f"{key}={value}" for key, value in sorted(spec.dataset.params.items()))
    return f"{name}({params})" if params else name


def group_of(spec: RunSpec) -> str:
    """A run's calibration group: its dataset, task and encoder (the runs of a disk experiment's group differ only
    in the disk system's options and the seed; a run whose model, sampler or batch size differs from its
    calibration run's is flagged in the table, see :func:`validate_recorded`)."""
    return f"{dataset_label(spec)}/{spec.training.task}/{spec.model.encoder}"


def training_setup(spec: RunSpec) -> tuple:
    """What besides the disk system's options sets a run's compute: model, sampler and batch size."""
    return (spec.model.model_dump_json(), spec.sampler.model_dump_json(), spec.training.batch_size)


def is_pipelined(spec: RunSpec) -> bool:
    """The disk system runs each state's batches through the staged pipeline."""
    return spec.system.options.get("pipeline") is not None


def _eligible(spec: RunSpec, policy: str | None, any_share: bool = False) -> bool:
    """A disk run of seed 0 with ``policy``, prefetch on, not pipelined and ``buffer_capacity = num_partitions / 4``
    (``any_share``: any buffer capacity)."""
    options = spec.system.options
    p, c = options.get("num_partitions"), options.get("buffer_capacity")
    return (spec.system.name == "disk" and spec.seed == 0 and bool(options.get("prefetch", True))
            and policy is not None and options.get("policy") == policy and not is_pipelined(spec)
            and p is not None and c is not None and (any_share or 4 * c == p))


def designated_calibration(specs: Sequence[RunSpec]) -> tuple[int, ...]:
    """The calibration rule, fixed before any prediction is looked at: of one group's disk runs (``specs``), the
    indices of the runs whose records calibrate the simulator, pooled (empty when the group has none).

    First the run of seed 0 with the group's task's first policy (:data:`CALIBRATION_POLICIES`: ``sequential`` for
    node classification, ``comet`` for link prediction), prefetch on, not pipelined and ``buffer_capacity =
    num_partitions / 4``, at the finest ``num_partitions`` among such runs (the configuration the disk claims are
    decided on); of equals, the first listed. Then, per further policy of the task (``dispersed`` for node
    classification), the first listed run of that policy with the same ``num_partitions`` and ``buffer_capacity``,
    seed 0, prefetch on, not pipelined (left out when the group has none: the costs table says so). Node
    classification then adds the first listed run of the first policy at the same ``num_partitions`` and another
    ``buffer_capacity`` (seed 0, prefetch on, not pipelined), where there is one: its compute is fitted on the edges
    its batches sample (:func:`state_sampled_edges`), which at one buffer share are proportional to the examples, so
    the per-edge and the per-batch compute are told apart only across shares (added after the first rule's results
    had been seen: with one share the per-edge cost absorbed the per-batch one and runs at c / p = 0.44-0.5 were
    predicted 10-21 % long; both results are in docs/simulators.md). Every other run of the group is predicted from
    its plans and store sizes only; the designated runs never are."""
    candidates = []
    for index, spec in enumerate(specs):
        policies = CALIBRATION_POLICIES.get(spec.training.task, ())
        if policies and _eligible(spec, policies[0]):
            candidates.append((-spec.system.options["num_partitions"], index))
    if not candidates:
        return ()
    first = specs[min(candidates)[1]]
    chosen = [min(candidates)[1]]
    size = (first.system.options["num_partitions"], first.system.options["buffer_capacity"])
    for policy in CALIBRATION_POLICIES[first.training.task][1:]:
        chosen.extend([index for index, spec in enumerate(specs) if _eligible(spec, policy)
                       and (spec.system.options["num_partitions"], spec.system.options["buffer_capacity"]) == size
                       and spec.training.task == first.training.task][:1])
    if first.training.task != "link_prediction":
        chosen.extend([index for index, spec in enumerate(specs)
                       if _eligible(spec, first.system.options["policy"], any_share=True)
                       and spec.system.options["num_partitions"] == size[0]
                       and spec.system.options["buffer_capacity"] != size[1]
                       and spec.training.task == first.training.task][:1])
    return tuple(chosen)


def recorded_disk_runs(runs_roots: Sequence[Path]) -> list[tuple[Path, RunSpec]]:
    """The disk runs recorded under ``runs_roots`` (run folders with a ``config.yaml`` naming the disk system, in
    folder order; runs of other systems left out)."""
    found = []
    for root in runs_roots:
        if not root.is_dir():
            raise ConfigError(f"{root}: not a folder of recorded runs")
        for config in sorted(root.glob("*/config.yaml")):
            spec = load_spec(config)
            if spec.system.name == "disk":
                found.append((config.parent, spec))
    if not found:
        raise ConfigError(f"no disk run recorded under {', '.join(map(str, runs_roots))}")
    return found


def run_identity(run_dir: Path, spec: RunSpec) -> dict[str, Any]:
    """The configuration columns of a recorded run's row."""
    options = spec.system.options
    return {"group": group_of(spec), "dataset": dataset_label(spec), "task": spec.training.task,
            "run_id": run_dir.name, "name": spec.name, "policy": options.get("policy"),
            "num_partitions": options.get("num_partitions"), "buffer_capacity": options.get("buffer_capacity"),
            "prefetch": bool(options.get("prefetch", True)), "pipelined": is_pipelined(spec), "seed": spec.seed}


def machine_cores(run_dir: Path, default: float = MACHINE_CORES) -> float:
    """Cores of the machine a run was recorded on (its ``summary.json``), else ``default``."""
    cores = ((read_summary(run_dir) or {}).get("machine") or {}).get("cpu_cores")
    return float(cores) if cores else default


def _loaded(run_dir: Path) -> RunInputs | str:
    """The run's inputs, or why they could not be read (a row is reported either way)."""
    try:
        return load_run(run_dir)
    except SuiteError as err:
        return f"not loaded: {err}"


def _costs_of(run: RunInputs) -> DiskCosts | str:
    """The costs fitted on a run, or why they could not be."""
    try:
        return calibrate_on(run)
    except SuiteError as err:
        return f"calibration failed: {err}"


def _measured_row(run: RunInputs | str) -> dict[str, Any]:
    """Measured warm epoch time and bytes of a run predicted by nothing."""
    if isinstance(run, str):
        return {}
    try:
        _, measured_s, planned, recorded = measured_warm(run)
    except SuiteError:
        return {}
    return {"measured_epoch_s": measured_s, "planned_read_bytes": planned, "recorded_read_bytes": recorded}


def _variant_error(run: RunInputs, costs: DiskCosts | str | None) -> float:
    """The error of ``run`` predicted on ``costs`` (NaN without them)."""
    return compare(run, costs)["error"] if isinstance(costs, DiskCosts) else math.nan


def _calibration(members: list[tuple[Path, RunSpec]], picks: Sequence[int], loaded: dict[Path, RunInputs | str],
                 cores: float | None) -> tuple[DiskCosts | str, dict[str, Any]]:
    """A group's costs, fitted on its designated runs ``members[picks]`` pooled (or why there are none), and its
    costs row: the costs, the calibration runs (`` + ``-joined), their mean foreign load, machine cores, in-sample
    errors (``in_sample_error``: the largest in absolute value; ``in_sample_errors``: per run), the pooled fit's
    :func:`compute_rank` (``compute_ranks_alone``: each run's alone), ``compute_identified`` and a ``note`` when
    the pooled compute fit is still rank-deficient or a designated policy has no run."""
    task = members[0][1].training.task
    row: dict[str, Any] = {"group": group_of(members[0][1]), "calibration_run": None}
    if not picks:
        return NO_CALIBRATION, row
    dirs = [members[pick][0] for pick in picks]
    row["calibration_run"] = " + ".join(run_dir.name for run_dir in dirs)
    failed = [loaded[run_dir] for run_dir in dirs if isinstance(loaded[run_dir], str)]
    if failed:
        return failed[0], {**row, "note": failed[0]}
    runs = [loaded[run_dir] for run_dir in dirs]
    try:
        costs = calibrate_on(runs)
    except SuiteError as err:
        return f"calibration failed: {err}", {**row, "note": f"calibration failed: {err}"}
    errors = [compare(run, costs)["error"] for run in runs]
    rank = compute_rank(runs)
    notes = []
    missing = [policy for policy in CALIBRATION_POLICIES.get(task, ())
               if policy not in {run.options.policy for run in runs}]
    if missing:
        notes.append(f"no designated {' / '.join(missing)} run: calibrated on {len(runs)} run(s)")
    if rank < FULL_COMPUTE_RANK:
        notes.append(f"compute fit rank-deficient (rank {rank} of {FULL_COMPUTE_RANK}): per-state, per-batch and "
                     "per-example (or per-edge) compute not told apart; its runs' predictions are flagged")
    load = [foreign_cores(run) for run in runs]
    return costs, {**row, "foreign_cores": float(np.nanmean(load)) if not np.isnan(load).all() else math.nan,
                   "cores": cores or machine_cores(dirs[0]),
                   "in_sample_error": max(errors, key=abs),
                   "in_sample_errors": " / ".join(f"{error:+.4f}" for error in errors), "compute_rank": rank,
                   "compute_ranks_alone": " / ".join(str(compute_rank(run)) for run in runs),
                   "compute_identified": rank >= FULL_COMPUTE_RANK, "note": "; ".join(notes) or None,
                   **costs.as_dict()}


def _group_rows(members: list[tuple[Path, RunSpec]], picks: Sequence[int], cores: float | None
                ) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, float], list[str]]:
    """One group's rows: every run but the designated ones (``picks``) predicted on their pooled costs, with the
    replay and previous-run variants; its costs row; the measured warm epoch time of every run (the designated ones
    too) for the run-to-run spread; and the designated runs' names."""
    loaded = {run_dir: _loaded(run_dir) for run_dir, _ in members}
    own = {run_dir: _costs_of(run) for run_dir, run in loaded.items() if isinstance(run, RunInputs)}
    order = sorted((run for run in loaded.values() if isinstance(run, RunInputs)), key=started_at)
    previous = {later.run_dir: earlier.run_dir for earlier, later in zip(order, order[1:])}
    measured = {run_dir.name: row["measured_epoch_s"] for run_dir, run in loaded.items()
                if "measured_epoch_s" in (row := _measured_row(run))}
    costs, costs_row = _calibration(members, picks, loaded, cores)
    setups = {training_setup(members[pick][1]) for pick in picks}
    rank = costs_row.get("compute_rank")
    rows = []
    for index, (run_dir, spec) in enumerate(members):
        if index in picks:
            continue
        run, row = loaded[run_dir], run_identity(run_dir, spec)
        row["calibration_run"] = costs_row["calibration_run"]
        if isinstance(run, str) or not isinstance(costs, DiskCosts):
            rows.append({**row, **_measured_row(run), "note": run if isinstance(run, str) else costs})
            continue
        try:
            predicted = compare(run, costs, costs_row["foreign_cores"], costs_row["cores"])
        except SuiteError as err:
            rows.append({**row, **_measured_row(run), "note": f"not predicted: {err}"})
            continue
        notes = [] if training_setup(spec) in setups else ["model differs from calibration"]
        if rank < FULL_COMPUTE_RANK:
            notes.append(f"calibration compute fit rank-deficient (rank {rank} of {FULL_COMPUTE_RANK})")
        prior = previous.get(run_dir)
        rows.append({**predicted, **row, "calibration_compute_rank": rank,
                     "replay_error": _variant_error(run, own.get(run_dir)),
                     "previous_run": prior.name if prior else None,
                     "previous_run_error": _variant_error(run, own.get(prior)) if prior else math.nan,
                     "note": "; ".join(notes) or None})
    return rows, costs_row, measured, [members[pick][0].name for pick in picks]


def validate_recorded(runs_roots: Path | Sequence[Path],
                      rule: Callable[[Sequence[RunSpec]], Sequence[int]] = designated_calibration,
                      cores: float | None = None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Validate the simulator on disk runs already recorded (no new run): ``(runs, summary, costs)``.

    The disk runs under ``runs_roots`` (other systems' runs left out) are grouped by dataset, task and encoder
    (:func:`group_of`). Per group, ``rule`` (default :func:`designated_calibration`, fixed in advance: seed 0,
    prefetch on, not pipelined, ``c = p / 4``, finest ``p``; node classification: the ``sequential`` run and the
    ``dispersed`` run of the same ``p`` and ``c``; link prediction: the ``comet`` run) designates the runs whose
    records, pooled (:func:`~simulators.disk_epoch_model.calibrate_pooled`), calibrate the costs; every other run of
    the group (other seeds, policies, ``p`` and ``c``, prefetch off, pipelined) is predicted from its plans and its
    store's sizes only. The designated runs are never predicted (their in-sample errors are in the costs table). A
    run of a group without a designated run, or one that cannot be read or predicted, is kept in the table with a
    ``note`` and no prediction. A group whose pooled compute fit is rank-deficient (:func:`compute_rank` below 3)
    is still predicted, flagged: in the costs table (``compute_identified``, ``note``), on its runs' rows
    (``calibration_compute_rank``, ``note``) and in the summary (``rank_deficient_runs``).

    Per run (besides :func:`compare`'s columns): ``group``, ``dataset``, ``seed``, ``pipelined``,
    ``calibration_run``, ``bytes_equal`` (planned = recorded read bytes), ``replay_error`` (calibrated on the run's
    own records), ``previous_run_error`` (calibrated on the group's run recorded just before it, NaN for the first),
    ``load_error`` (the costs slowed by :func:`~simulators.disk_epoch_model.load_factor` for the foreign load each
    run recorded, on the calibration run's machine's cores unless ``cores``), and ``run_to_run`` (the run's
    relative deviation from the mean warm epoch time of its configuration's runs over the seeds, the designated run
    included). ``summary``: :func:`summarize` of the predicted runs, per task and over all (``over``: ``task``), and
    per group (``over``: ``group``).
    """
    roots = [runs_roots] if isinstance(runs_roots, Path) else list(runs_roots)
    groups: dict[str, list[tuple[Path, RunSpec]]] = {}
    for run_dir, spec in recorded_disk_runs(roots):
        groups.setdefault(group_of(spec), []).append((run_dir, spec))
    rows, costs_rows, measured, designated = [], [], {}, set()
    for members in groups.values():
        group_rows, costs_row, group_measured, names = _group_rows(
            members, tuple(rule([spec for _, spec in members])), cores)
        rows.extend(group_rows)
        costs_rows.append(costs_row)
        measured.update(group_measured)
        designated.update(names)
    runs = pd.DataFrame(rows)
    for column in ("error", "load_error", "replay_error", "previous_run_error", "predicted_epoch_s",
                   "measured_epoch_s", "planned_read_bytes", "recorded_read_bytes", "calibration_compute_rank"):
        if column not in runs:
            runs[column] = math.nan
    runs["bytes_equal"] = runs["planned_read_bytes"] == runs["recorded_read_bytes"]
    runs["run_to_run"] = recorded_spread(runs, designated, groups, measured)
    predicted = runs[runs["error"].notna()]
    summary = pd.DataFrame()
    if len(predicted):
        by_group = summarize(predicted.assign(task=predicted["group"]))
        summary = pd.concat([summarize(predicted).assign(over="task"),
                             by_group[by_group["task"] != "all"].assign(over="group")], ignore_index=True)
    return runs, summary, pd.DataFrame(costs_rows)


def recorded_spread(runs: pd.DataFrame, designated: set[str], groups: dict[str, list[tuple[Path, RunSpec]]],
                    measured: dict[str, float]) -> pd.Series:
    """Per row of ``runs``, :func:`run_to_run_spread` over its configuration's recorded runs, the groups'
    designated (unpredicted) runs (their names: ``designated``) included."""
    extra = [{**run_identity(run_dir, spec), "measured_epoch_s": measured.get(run_dir.name, math.nan)}
             for members in groups.values() for run_dir, spec in members if run_dir.name in designated]
    every = pd.concat([runs, pd.DataFrame(extra)], ignore_index=True) if extra else runs
    return run_to_run_spread(every).iloc[:len(runs)].set_axis(runs.index)


def run_grids(runs_root: Path, tasks: Sequence[str]) -> None:
    """Run the calibration and held-out grids of ``tasks`` (finished runs are skipped)."""
    from suite.grid import expand_grid, failures, run_grid

    for task in tasks:
        for grid in (f"{TASKS[task]}_calibration.yaml", f"{TASKS[task]}.yaml"):
            results = run_grid(expand_grid(SPECS / grid), runs_root, progress=False)
            failed = failures(results)
            if failed:
                raise ConfigError(f"{grid}: {len(failed)} runs failed (first: {failed[0]})")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the grids (unless ``--no-run``), validate, write the tables and print the summary."""
    parser = argparse.ArgumentParser(prog="python -m experiments.measure.disk_simulation",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=REPO_ROOT / "out" / "runs", help="run folder (default out/runs)")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "out" / "results",
                        help="tables folder (default out/results)")
    parser.add_argument("--tasks", nargs="+", choices=sorted(TASKS), default=sorted(TASKS))
    parser.add_argument("--no-run", action="store_true", help="validate the runs already recorded")
    parser.add_argument("--recorded", type=Path, nargs="+", metavar="DIR",
                        help="instead of the grids: validate on the disk runs already recorded in these folders "
                             "(a disk experiment's runs; no run is made, --runs and --tasks unused): the designated "
                             "runs of each group calibrate, pooled, every other is predicted (validate_recorded); "
                             "writes disk_simulation_recorded_{runs,summary,costs}.csv")
    args = parser.parse_args(argv)
    try:
        if args.recorded:
            runs, summary, costs = validate_recorded(args.recorded)
        else:
            if not args.no_run:
                run_grids(args.runs, args.tasks)
            runs, summary, costs = validate(args.runs, args.tasks)
    except SuiteError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    prefix = "disk_simulation_recorded" if args.recorded else "disk_simulation"
    args.out.mkdir(parents=True, exist_ok=True)
    for name, table in (("runs", runs), ("summary", summary), ("costs", costs)):
        table.to_csv(args.out / f"{prefix}_{name}.csv", index=False)
    print_tables(runs, summary, costs)
    return 0


def print_tables(runs: pd.DataFrame, summary: pd.DataFrame, costs: pd.DataFrame) -> None:
    """Print the runs (the columns present), the summary and the costs."""
    columns = ["group", "task", "policy", "num_partitions", "buffer_capacity", "prefetch", "pipelined", "seed",
               "run_id", "measured_epoch_s", "predicted_epoch_s", "error", "load_error", "previous_run_error",
               "replay_error", "run_to_run", "planned_read_bytes", "recorded_read_bytes", "foreign_cores", "note"]
    with pd.option_context("display.width", 250, "display.max_columns", 40, "display.precision", 4):
        print(runs[[c for c in columns if c in runs]].to_string(index=False))
        print(summary.T.to_string(header=False))
        print(costs.T.to_string(header=False))


if __name__ == "__main__":
    sys.exit(main())
