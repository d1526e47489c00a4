"""Calibrate the pipeline simulator on a recorded run, and scale it to other machines (what-if).

Calibration (:func:`calibrate`) reads the ``batch`` records of one pipelined run, every epoch of it but its first
``warmup_batches`` batches (the run's warm-up: the first load compiles the samplers' kernels, seconds where a warm
load takes milliseconds): per stage, the measured service time of every batch becomes an
:class:`~simulators.pipeline_model.Empirical` distribution, and the gap between a batch's previous stage ending and
the stage starting (its queue hand-off, the wake-up of the worker) the stage's hand-off delay. These
are the stage's *work*, its duration when it runs alone, only if nothing overlapped in the calibration run: so
calibrate on a ``sync: true`` run (or on an async run whose stages did not contend), and predict the others.
The CPU the stages share (:class:`~simulators.pipeline_model.SharedCpu`) has the recorded machine's cores; a load job
uses one core (the samplers' kernels are single-threaded), a compute job on the CPU uses torch's intra-op threads,
a transfer takes no CPU core. Torch's threads follow the run's thread budget (:func:`suite.threads.plan_budget`: the
cores the system's own busy threads, its loaders, leave free), so a simulated configuration's compute wants the
threads *its* budget gives (at most the calibration run's, whose times were measured with them; the work is not
rescaled for fewer threads, which no record measures).

What oversubscribing the cores costs beyond sharing them (torch's OpenMP barriers, the GIL, memory bandwidth) is
not in a synchronous run's records: it is measured by a microbenchmark on the machine, in the experiments layer
(:func:`experiments.measure.contention.measure_for_run`, the calibration run's own sampler, model and batch shape,
loaders as threads and as processes), and handed to :func:`calibrate` as ``contention``; :func:`model_for` then
gives the simulated CPU the table for the options' ``loader_workers`` and, for loader processes, scales the
calibrated loads (recorded in a thread) by the measured time a loader process spends per batch over a load in a
thread (one torch thread per worker, handing the batch over); on the recorded machine only (not for what-if
hardware). Without it the CPU is shared max-min fairly and nothing more. Nothing is ever fitted on the runs the
model predicts.

:func:`model_for` builds the simulated pipeline for any options of the ``pipelined`` system (workers, queues,
staleness bound, in-order compute) from a calibration, optionally on another machine (:class:`Hardware`). What-if
scaling, every figure named and assumed, not measured:

- compute on a GPU: FLOPs per batch (:func:`graphsage_flops`, from the recorded sampled edges and input nodes of
  each batch and the model's dimensions) / (the GPU's peak FP32 FLOP/s x ``gpu_efficiency``), no CPU core;
- transfer: bytes per batch (features of the input nodes + the sampled edges as int64 pairs) / PCIe bandwidth;
- load: as measured here per batch (per-core speed assumed equal), with the machine's cores.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from suite.config import RunSpec, spec_from_dict
from suite.errors import DataError
from suite.recorder import read_records, read_summary
from suite.threads import plan_budget
from simulators.contention_model import Contention
from simulators.pipeline_model import Empirical, Fixed, PipelineModel, StageModel

STAGES = ("load", "transfer", "compute")
WARMUP_BATCHES = 2
"""Batches at the start of a calibration run left out of its service times (the first compiles the kernels)."""


@dataclass(frozen=True)
class Hardware:
    """The performance figures of a machine, for what-if simulation; each is an assumption with a source.

    Attributes:
        name: a machine profile name (``suite.pricing``) or a label.
        cpu_cores: cores loaders and CPU compute share.
        gpu_tflops: peak FP32 TFLOP/s of the GPU (None: compute on the CPU, as measured).
        gpu_efficiency: fraction of the peak a sampled-GNN training step achieves (sparse, memory-bound work).
        pcie_gbps: host-to-device bandwidth in GB/s (None: no transfer cost, as on the CPU).
        source: where the figures come from.
    """

    name: str
    cpu_cores: float
    gpu_tflops: float | None = None
    gpu_efficiency: float = 0.2
    pcie_gbps: float | None = None
    source: str = ""


HARDWARE: dict[str, Hardware] = {
    hw.name: hw for hw in (
        Hardware("p3.2xlarge", cpu_cores=4, gpu_tflops=15.7, pcie_gbps=12.0,
                 source="V100 SXM2 FP32 peak 15.7 TFLOP/s (NVIDIA V100 datasheet); PCIe 3.0 x16, ~12 GB/s "
                        "achieved pinned copies; 8 vCPUs = 4 cores; efficiency 0.2 assumed for sampled GNNs"),
        Hardware("g5.xlarge", cpu_cores=2, gpu_tflops=31.2, pcie_gbps=12.0,
                 source="A10G FP32 peak 31.2 TFLOP/s (NVIDIA A10 datasheet; A10G similar); PCIe 4.0 x8 ~12 GB/s "
                        "assumed; 4 vCPUs = 2 cores; efficiency 0.2 assumed"),
        Hardware("p4d.24xlarge", cpu_cores=48, gpu_tflops=19.5, pcie_gbps=24.0,
                 source="A100 FP32 peak 19.5 TFLOP/s (NVIDIA A100 datasheet, non-tensor-core); PCIe 4.0 x16 "
                        "~24 GB/s achieved; 96 vCPUs = 48 cores; one of its 8 GPUs; efficiency 0.2 assumed"),
    )
}


@dataclass(frozen=True)
class Calibration:
    """Service-time models of one recorded run.

    Attributes:
        source: the run folder.
        services: per stage, the measured service times of the calibration's batches (every epoch's but the
            first ``warmup_batches``; seconds).
        cores: per stage, CPU cores one job uses when alone.
        cpu_cores: cores of the recorded machine.
        num_batches: batches in the warm epoch.
        sampled_edges / input_nodes: per batch, for what-if compute and transfer costs.
        spec: the run's resolved spec.
        handoffs: per stage, the measured gaps between a batch's previous stage ending (its admission, for the
            first stage) and the stage starting (seconds).
        compute_threads: torch's intra-op threads in the calibration run (its compute times were measured with
            them).
        contention: slowdown factors of oversubscribed stages measured on the machine (None: max-min sharing
            only); see :mod:`simulators.contention_model`.
    """

    source: str
    services: dict[str, tuple[float, ...]]
    cores: dict[str, float]
    cpu_cores: float
    num_batches: int
    sampled_edges: tuple[int, ...]
    input_nodes: tuple[int, ...]
    spec: RunSpec
    extra: dict[str, Any] = field(default_factory=dict)
    contention: Contention | None = None
    handoffs: dict[str, tuple[float, ...]] = field(default_factory=dict)
    compute_threads: float = 1.0


def _batch_records(run_dir: str | Path) -> list[dict[str, Any]]:
    """The ``batch`` records of a run in run order (epoch, index); DataError if it has none."""
    records = [r for r in read_records(run_dir) if r.get("kind") == "batch"]
    if not records:
        raise DataError(f"{run_dir}: no 'batch' records (only pipelined runs with record_batches record them)")
    return sorted(records, key=lambda r: (r["epoch"], r["index"]))


def _last_epoch(batches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    last = batches[-1]["epoch"]
    return [b for b in batches if b["epoch"] == last]


def _past_warmup(batches: list[dict[str, Any]], warmup_batches: int) -> list[dict[str, Any]]:
    return batches[warmup_batches:] if len(batches) > warmup_batches else batches


def warm_epoch_batches(run_dir: str | Path) -> list[dict[str, Any]]:
    """The ``batch`` records of the run's last (warm) epoch; DataError if the run has none."""
    return _last_epoch(_batch_records(run_dir))


def calibration_batches(run_dir: str | Path, warmup_batches: int = WARMUP_BATCHES) -> list[dict[str, Any]]:
    """The ``batch`` records of every epoch of a run, in run order, but its first ``warmup_batches`` (all of them
    if that would leave none); DataError if the run has none."""
    return _past_warmup(_batch_records(run_dir), warmup_batches)


def handoff_gaps(batches: list[dict[str, Any]], stages: tuple[str, ...] = STAGES) -> dict[str, tuple[float, ...]]:
    """Per stage the batches went through (of ``stages``, in order), the gap between each batch becoming ready for
    it (the previous such stage's end; for the first, the batch's admission) and the stage starting on it, clipped
    at 0 (stamps taken by different threads)."""
    present = [stage for stage in stages if f"{stage}_start" in batches[0]]
    readies = ["admitted"] + [f"{stage}_end" for stage in present[:-1]]
    # a run without admission stamps (a sync run of a system that admits nothing) has no first hand-off: 0
    return {stage: tuple(max(0.0, float(b[f"{stage}_start"] - b.get(ready, b[f"{stage}_start"]))) for b in batches)
            for stage, ready in zip(present, readies)}


def calibrate(run_dir: str | Path, contention: Contention | None = None,
              warmup_batches: int = WARMUP_BATCHES) -> Calibration:
    """Fit the stage service times and hand-off delays of the recorded pipelined run in ``run_dir`` (every epoch
    but its first ``warmup_batches`` batches); ``contention`` (measured on the machine, e.g. by
    :func:`experiments.measure.contention.measure_for_run`) goes with them."""
    run_dir = Path(run_dir)
    summary = read_summary(run_dir) or {}
    config = (run_dir / "config.yaml")
    if not config.exists():
        raise DataError(f"{config}: file not found (not a run folder)")
    from suite.config import read_yaml

    spec = spec_from_dict(read_yaml(config), source=str(config))
    recorded = _batch_records(run_dir)  # read once: the warm epoch's count and the calibration's batches
    batches = _past_warmup(recorded, warmup_batches)
    services = {stage: tuple(float(b[f"{stage}_end"] - b[f"{stage}_start"]) for b in batches)
                for stage in STAGES if f"{stage}_start" in batches[0]}
    warm_count = len(_last_epoch(recorded))
    machine = summary.get("machine") or {}
    cpu_cores = float(machine.get("cpu_cores") or 1)
    threads = float((summary.get("threads") or {}).get("compute") or machine.get("torch_threads") or cpu_cores)
    on_gpu = str(summary.get("device", "cpu")).startswith("cuda")
    cores = {"load": 1.0, "transfer": 0.0, "compute": 0.0 if on_gpu else min(threads, cpu_cores)}
    return Calibration(source=str(run_dir), services=services, cores=cores, cpu_cores=cpu_cores,
                       num_batches=warm_count, handoffs=handoff_gaps(batches), compute_threads=threads,
                       sampled_edges=tuple(int(b.get("sampled_edges", 0)) for b in batches),
                       input_nodes=tuple(int(b.get("input_nodes", 0)) for b in batches), spec=spec,
                       contention=contention)


def graphsage_flops(spec: RunSpec, sampled_edges: float, input_nodes: float, feature_dim: int) -> float:
    """Estimated FLOPs of one GraphSAGE training step (forward + backward = 3 x forward).

    Forward per layer: one add per sampled edge and input dimension (mean aggregation) and two dense products
    (self and neighbours) over the layer's rows. The rows of inner layers are not recorded; all layers are
    priced at the input nodes and all edges at the first layer's width (an upper bound, named as such).
    """
    hidden = spec.model.hidden_dim
    widths = [feature_dim] + [hidden] * spec.model.num_layers
    forward = sum(sampled_edges * k_in + 2 * 2 * input_nodes * k_in * k_out
                  for k_in, k_out in zip(widths, widths[1:]))
    return 3.0 * forward


def _gpu_compute(calibration: Calibration, hardware: Hardware, feature_dim: int) -> Empirical:
    flops = [graphsage_flops(calibration.spec, e, n, feature_dim)
             for e, n in zip(calibration.sampled_edges, calibration.input_nodes)]
    rate = hardware.gpu_tflops * 1e12 * hardware.gpu_efficiency
    return Empirical(tuple(f / rate for f in flops))


def _pcie_transfer(calibration: Calibration, hardware: Hardware, feature_dim: int) -> Empirical:
    nbytes = [4 * n * feature_dim + 16 * e for e, n in zip(calibration.sampled_edges, calibration.input_nodes)]
    return Empirical(tuple(b / (hardware.pcie_gbps * 1e9) for b in nbytes))


def model_for(options: Any, calibration: Calibration, hardware: Hardware | None = None,
              feature_dim: int | None = None) -> PipelineModel:
    """The simulated pipeline for ``options`` (:class:`systems.pipelined.PipelineOptions`, effective) with the
    calibrated service times, on the recorded machine (with the calibration's contention table for the options'
    ``loader_workers`` and its load scale, if it has them) or on ``hardware`` (max-min sharing only)."""
    services = {stage: Empirical(samples) for stage, samples in calibration.services.items()}
    cores = dict(calibration.cores)
    cpu_cores = calibration.cpu_cores
    if hardware is not None:
        cpu_cores = hardware.cpu_cores
        if hardware.gpu_tflops is not None:
            if feature_dim is None:
                raise ValueError("what-if compute on a GPU needs the feature dimension")
            services["compute"] = _gpu_compute(calibration, hardware, feature_dim)
            cores["compute"] = 0.0
        if hardware.pcie_gbps is not None and feature_dim is not None:
            services["transfer"] = _pcie_transfer(calibration, hardware, feature_dim)
    contention = None
    if hardware is None and calibration.contention is not None:
        kind = getattr(options, "loader_workers", "thread")
        contention = calibration.contention.table(kind)
        scale = calibration.contention.load_scale.get(kind, 1.0)
        if scale != 1.0:  # a loader process's time per batch (one torch thread, handing the batch over), measured
            services["load"] = Empirical(calibration.services["load"], scale=scale)
    if hardware is None and cores["compute"] > 0:  # the options' thread budget, on the recorded machine
        cores["compute"] = compute_cores(options, calibration)
    handoff = {stage: Empirical(gaps) for stage, gaps in calibration.handoffs.items() if gaps}
    # Loader processes take one core each, like loader threads (the feeder thread only hands batches on); their
    # time per batch is the thread's times the measured load scale, when the calibration has one (above).
    stages = (
        StageModel("load", services["load"], workers=options.batch_loader_threads, cores=cores["load"],
                   handoff=handoff.get("load")),
        StageModel("transfer", services.get("transfer", Fixed(0.0)), workers=options.batch_transfer_threads,
                   queue_size=options.batch_host_queue_size, cores=cores["transfer"], handoff=handoff.get("transfer")),
        StageModel("compute", services["compute"], workers=1, queue_size=options.batch_device_queue_size,
                   cores=cores["compute"], in_order=options.in_order_compute, handoff=handoff.get("compute")),
    )
    return PipelineModel(stages=stages, staleness_bound=options.staleness_bound, cpu_cores=cpu_cores,
                         contention=contention)


def compute_cores(options: Any, calibration: Calibration) -> float:
    """Cores a CPU compute job of ``options`` wants on the recorded machine: the torch threads of its thread budget
    (the cores its loader threads leave, :func:`suite.threads.plan_budget`), at most the calibration run's."""
    budget = plan_budget(options.batch_loader_threads, cores=max(1, int(calibration.cpu_cores)))
    return float(min(budget.compute, calibration.compute_threads, calibration.cpu_cores))


def summary_of(trace) -> dict[str, float]:
    """Epoch time, per-stage busy time, compute utilization, efficiency and staleness of a (simulated) trace."""
    busy = trace.busy_s()
    staleness = [b.staleness for b in trace.batches]
    return {"epoch_time_s": trace.wall_s, **{f"busy_{k}_s": v for k, v in busy.items()},
            "compute_utilization": busy["compute"] / trace.wall_s if trace.wall_s else math.nan,
            "pipeline_efficiency": trace.efficiency(), "bottleneck_stage": trace.bottleneck()[0],
            "staleness_mean": float(np.mean(staleness)) if staleness else 0.0,
            "staleness_max": int(max(staleness, default=0))}


__all__ = ["Calibration", "HARDWARE", "Hardware", "WARMUP_BATCHES", "calibrate", "calibration_batches",
           "compute_cores", "graphsage_flops", "handoff_gaps", "model_for", "summary_of", "warm_epoch_batches"]
