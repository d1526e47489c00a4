"""The simulators' own speed: the pipeline DES over 10,000 batches and the buffer/IO simulator at large ``p``.

- :class:`PipelineSimulation`: :func:`simulators.pipeline_model.simulate` of a Marius-style pipeline (4 loaders, 2
  transfer workers, one in-order compute worker, queues of 4) for :data:`NUM_BATCHES` batches with log-normal
  service times, loaders and compute on the CPU, the cores shared by processor sharing (``cpu_cores = 4``: four
  cores for up to five jobs; with a staleness bound of 4 at most four run at once) or without contention
  (``None``), at two staleness bounds. ``time_simulate`` is the wall time of the simulation; ``track_simulated_epoch_s`` the
  epoch time it predicts (simulated seconds: a change there is a change of the model, not of its speed).
- :class:`BufferSimulation`: :func:`simulators.buffer_model.simulate` of one epoch of a BETA or COMET plan for
  Hyperlink-2012-sized link prediction (learnable embeddings, every bucket read once), ``c = p / 8``. The plan is
  generated in ``setup``; the timed call prices it (per-state bucket counts, bytes, serial and prefetch epoch
  times). ``track_bytes_read_tb`` is the predicted terabytes read per epoch.
"""

from __future__ import annotations

from simulators.buffer_model import HYPERLINK_2012, simulate as simulate_buffer
from simulators.pipeline_model import Fixed, LogNormal, PipelineModel, StageModel, simulate as simulate_pipeline
from systems.disk.policies import PolicySpec, make_plan

NUM_BATCHES = 10_000
SEED = 0


def pipeline_model(cpu_cores: float | None, staleness_bound: int) -> PipelineModel:
    """Loaders (4 workers, one core each) and compute on the CPU (one core); with ``cpu_cores = 4`` the five
    running jobs contend for four cores (processor sharing); with ``None`` every stage runs at full speed."""
    stages = (
        StageModel("load", LogNormal(4e-3, 0.3), workers=4, cores=1.0),
        StageModel("transfer", Fixed(5e-4), workers=2, queue_size=4, cores=0.0),
        StageModel("compute", LogNormal(1.5e-3, 0.2), workers=1, queue_size=4, cores=1.0, in_order=True),
    )
    return PipelineModel(stages=stages, staleness_bound=staleness_bound, cpu_cores=cpu_cores)


class PipelineSimulation:
    """Simulating an epoch of :data:`NUM_BATCHES` batches, ``cpu_cores`` x ``staleness_bound``."""

    params = [[None, 4.0], [4, 16]]
    param_names = ["cpu_cores", "staleness_bound"]
    timeout = 300.0
    number = 1
    repeat = (1, 5, 60.0)

    num_batches = NUM_BATCHES
    """Batches per simulated epoch (the tests lower it on the instance)."""

    def setup(self, cpu_cores: float | None, staleness_bound: int) -> None:
        """The model."""
        self.model = pipeline_model(cpu_cores, staleness_bound)

    def time_simulate(self, cpu_cores: float | None, staleness_bound: int) -> None:
        """Simulate one epoch."""
        simulate_pipeline(self.model, self.num_batches, seed=SEED)

    def track_simulated_epoch_s(self, cpu_cores: float | None, staleness_bound: int) -> float:
        """The simulated epoch time (seconds of simulated time)."""
        return simulate_pipeline(self.model, self.num_batches, seed=SEED).wall_s

    track_simulated_epoch_s.unit = "s (simulated)"


class BufferSimulation:
    """Pricing one epoch's plan, ``policy`` x ``num_partitions``."""

    params = [["beta", "comet"], [1024, 4096]]
    param_names = ["policy", "num_partitions"]
    timeout = 600.0
    number = 1
    repeat = (1, 3, 60.0)

    def setup(self, policy: str, num_partitions: int) -> None:
        """A fresh plan (its bucket assignment is computed, and cached, by the timed call) and the disk model."""
        ratio = 4 if policy == "comet" else 1
        spec = PolicySpec(num_partitions, num_partitions // 8, fine_to_coarse_ratio=ratio)
        self.plan = make_plan(policy, spec, seed=SEED, epoch=0)
        self.disk = HYPERLINK_2012.disk_model(num_partitions, compute_per_example_s=2e-7)

    def time_simulate(self, policy: str, num_partitions: int) -> None:
        """Price the plan."""
        simulate_buffer(self.plan, self.disk)

    def track_bytes_read_tb(self, policy: str, num_partitions: int) -> float:
        """Terabytes read per epoch."""
        return simulate_buffer(self.plan, self.disk).bytes_read / 1e12

    track_bytes_read_tb.unit = "TB"
