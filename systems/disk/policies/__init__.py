"""Partition-buffer policies as *plans*: pure data that the disk system executes and the simulators price.

A policy (declared by name in the ``policies`` plugin table, looked up in :data:`POLICIES`) turns a
:class:`PolicySpec` (``p`` node partitions on disk, a buffer of ``c`` partition slots in memory, the task and its training examples) and an
explicit :class:`numpy.random.Generator` into a :class:`~systems.disk.plan.BufferPlan` for one epoch (the plan
type and its contract: :mod:`systems.disk.plan`). :func:`make_plan` derives the generator from ``(seed, epoch)``,
so a plan is a deterministic function of ``(policy, spec, seed, epoch)``.

The built-in policies are lines of the ``policies`` table in :mod:`systems.plugins`; the spec, the base class,
the registry :data:`POLICIES` and :func:`make_plan` are in :mod:`systems.disk.policies.policy`, the policies in
:mod:`~systems.disk.policies.beta` (``beta``, ``comet``),
:mod:`~systems.disk.policies.baselines` (``random``, ``in_memory``) and
:mod:`~systems.disk.policies.node_policies` (``sequential``, ``dispersed``). The plan type is re-exported
here (``from systems.disk.policies import BufferPlan, PolicySpec, make_plan``).

Policies
--------
``beta``
    Marius's Buffer-aware Edge Traversal Algorithm on a random relabelling of the partitions: fill the buffer
    with ``c`` partitions; keep ``c - 1`` fixed and cycle the remaining slot through every partition on disk;
    then replace the fixed ones, one per state, by partitions not yet done; repeat until every pair has met.
    One partition per transition; swaps ``= (p-c) + (x+1)((p-c) - x(c-1)/2)``, ``x = floor((p-c)/(c-1))``
    (:func:`beta_swaps`). Buckets: ``"first"`` (greedy).
``comet``
    MariusGNN: ``l = p / fine_to_coarse_ratio`` logical partitions of ``r = fine_to_coarse_ratio`` physical
    ones, grouped by a fresh random permutation every epoch; BETA over the logical partitions with capacity
    ``c / r``; every bucket to a uniformly random state holding both its partitions (``"uniform"``).
``random``
    A naive baseline: a random covering visited in random order. The partitions are randomly split into
    ``g = ceil(p / h)`` groups of at most ``h = c // 2`` partitions (units); the states are all ``g (g-1) / 2``
    pairs of groups in uniformly random order (consecutive states share a group only by chance);
    ``"uniform"`` bucket assignment.
``in_memory``
    One state holding all ``p`` partitions (the plan's capacity is ``p``, whatever ``spec.capacity`` is).
``sequential`` (node classification)
    MariusGNN's SEQUENTIAL: the partitions holding the examples (training nodes; with a train-first or
    labeled-first node order, the first ones) stay in the buffer, the other ``w = c - t`` slots are a uniform draw
    without replacement from the remaining ``p - t`` partitions, fresh in every epoch
    (``default_rng((seed, epoch))``): one state per epoch. With ``PolicySpec.resident`` given (an evaluation pass),
    the slots are filled first with partitions already resident, so a pass over nodes in the kept partitions reads
    nothing.
``sequential_rotation`` (node classification)
    ``sequential`` whose free slots rotate through one permutation of the remaining partitions drawn from
    ``default_rng(seed)``: epoch ``e`` takes its ``w`` entries from position ``e * w`` on (cyclically), so every
    partition has been in the buffer after ``ceil((p - t) / w)`` epochs.
``sequential_neighborhood`` (node classification)
    ``sequential`` that also keeps, in every epoch, the first ``ceil(w / 2)`` partitions after the training ones
    (under the ``neighborhood-first`` node order: the training nodes' in-neighbours, most shared first); the other
    ``floor(w / 2)`` slots are the fresh random draw. Not MariusGNN's: a training node's first hop is then sampled
    from (nearly) all of its neighbours.
``dispersed`` (node classification)
    MariusGNN's DISPERSED: logical partitions as in COMET; start with ``c / r`` random logical partitions and
    replace one uniformly random slot per state by a uniformly random logical partition not yet loaded, until
    every one has been in the buffer (``l - c/r`` transitions); every training node to a uniformly random state
    holding its partition.

Every policy also accepts node classification (nodes then follow the policy's rule); ``sequential`` and
``dispersed`` are node classification only.
"""

from __future__ import annotations

from systems.disk.plan import ASSIGNMENTS, TASKS, BufferPlan, Transition
from systems.disk.policies.policy import POLICIES, PartitionPolicy, PolicySpec, epoch_generator, make_plan
from systems.disk.policies.baselines import InMemoryPolicy, RandomPolicy
from systems.disk.policies.beta import BetaPolicy, CometPolicy, beta_swaps, beta_walk, swap_lower_bound
from systems.disk.policies.node_policies import DispersedPolicy, SequentialPolicy, rotation_window

__all__ = [
    "ASSIGNMENTS", "POLICIES", "TASKS", "BetaPolicy", "BufferPlan", "CometPolicy", "DispersedPolicy", "InMemoryPolicy",
    "PartitionPolicy", "PolicySpec", "RandomPolicy", "SequentialPolicy", "Transition", "beta_swaps", "beta_walk",
    "epoch_generator", "make_plan", "rotation_window", "swap_lower_bound",
]
