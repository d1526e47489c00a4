"""Partition-buffer policies: plan generation, bucket assignment and swaps, BETA vs COMET, over ``p``.

Every benchmark plans one link-prediction epoch for ``p`` partitions and a buffer of ``c = p / 8`` partitions
(:data:`CAPACITY_FRACTION`; MariusGNN's large runs keep an eighth to a quarter of the graph in memory); COMET
groups :data:`COMET_RATIO` physical partitions per logical one.

- ``time_make_plan``: seconds to generate the plan (the buffer states as loads and evictions);
- ``time_bucket_assignment``: seconds to assign all ``p * p`` edge buckets to states and count them per state
  (what the disk system and the buffer simulator need from a plan; chunked, never a ``(p, p)`` array);
- ``track_swaps``: partitions read after the initial fill (BETA: exactly its closed form);
- ``track_swaps_over_lower_bound``: swaps / the lower bound of any ordering covering every pair.

``setup`` runs before every timed call (asv re-runs setup hooks), so each call sees a fresh plan: the plan
caches its assignment.
"""

from __future__ import annotations

from systems.disk.policies import BufferPlan, PolicySpec, make_plan, swap_lower_bound

POLICIES = ("beta", "comet")
NUM_PARTITIONS = (256, 512, 1024)
CAPACITY_FRACTION = 8
"""``c = p // CAPACITY_FRACTION``."""
COMET_RATIO = 4
SEED = 0


def policy_spec(policy: str, num_partitions: int) -> PolicySpec:
    """The link-prediction spec of ``policy`` at ``num_partitions`` (capacity ``p // 8``)."""
    ratio = COMET_RATIO if policy == "comet" else 1
    return PolicySpec(num_partitions, num_partitions // CAPACITY_FRACTION, fine_to_coarse_ratio=ratio)


def plan_for(policy: str, num_partitions: int) -> BufferPlan:
    """Epoch 0's plan of ``policy`` at ``num_partitions`` (seed :data:`SEED`)."""
    return make_plan(policy, policy_spec(policy, num_partitions), seed=SEED, epoch=0)


class PlanGeneration:
    """Cost and swaps of one epoch's plan, ``policy`` x ``num_partitions``."""

    params = [list(POLICIES), list(NUM_PARTITIONS)]
    param_names = ["policy", "num_partitions"]
    timeout = 300.0

    def setup(self, policy: str, num_partitions: int) -> None:
        """The spec, and a fresh plan for the benchmarks that need one."""
        self.spec = policy_spec(policy, num_partitions)
        self.plan = plan_for(policy, num_partitions)

    def time_make_plan(self, policy: str, num_partitions: int) -> None:
        """Generate the plan."""
        make_plan(policy, self.spec, seed=SEED, epoch=0)

    def time_bucket_assignment(self, policy: str, num_partitions: int) -> None:
        """Assign every edge bucket to a state and count the buckets per state."""
        self.plan.state_bucket_counts()

    def track_swaps(self, policy: str, num_partitions: int) -> int:
        """Partitions read after the initial fill."""
        return self.plan.swaps

    track_swaps.unit = "partitions"

    def track_swaps_over_lower_bound(self, policy: str, num_partitions: int) -> float:
        """Swaps relative to the lower bound of any covering order (1.0 is optimal)."""
        return self.plan.swaps / swap_lower_bound(num_partitions, self.spec.capacity)

    track_swaps_over_lower_bound.unit = "ratio"
