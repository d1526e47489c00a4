"""Partition-buffer policies as plans: hand-checked states, BETA's swap formula, coverage and determinism."""

from __future__ import annotations

import numpy as np
import pytest

from suite.errors import ConfigError, DataError
from systems.disk.plan import BufferPlan
from systems.disk.policies import POLICIES, PolicySpec, make_plan
from systems.disk.policies.beta import beta_swaps, beta_walk, swap_lower_bound
from systems.disk.policies.node_policies import random_fill, rotation_window

LP_POLICIES = ("beta", "comet", "random", "in_memory")
NC_POLICIES = ("beta", "comet", "random", "in_memory", "sequential", "sequential_neighborhood", "dispersed")


def test_policies_are_registered():
    assert {"beta", "comet", "random", "in_memory", "sequential", "dispersed"} <= set(POLICIES.names())


def test_beta_p4_c2_by_hand():
    """Canonical BETA (identity relabelling): cycle slot 1 through 2, 3; replace slot 0 by 1; cycle 2; then 3."""
    plan = make_plan("beta", PolicySpec(4, 2), randomize=False)
    assert plan.states == ((0, 1), (0, 2), (0, 3), (1, 3), (1, 2), (3, 2))
    assert plan.swaps == 5 == beta_swaps(4, 2) == swap_lower_bound(4, 2)
    t = plan.transition(3)  # (0, 3) -> (1, 3): slot 0 changes, partition 3 stays in slot 1
    assert t.slots.tolist() == [0] and t.partitions_loaded.tolist() == [1] and t.partitions_evicted.tolist() == [0]
    assert plan.transition(0).partitions_loaded.tolist() == [0, 1]
    assert plan.transition(0).partitions_evicted.tolist() == []
    # greedy: each bucket goes to the first state holding both of its partitions
    assert plan.bucket_state().tolist() == [[0, 0, 1, 2],
                                            [0, 0, 4, 3],
                                            [1, 4, 1, 5],
                                            [2, 3, 5, 2]]
    assert plan.state_bucket_counts().tolist() == [4, 3, 3, 2, 2, 2]
    assert plan.examples_of_state(3).tolist() == [[1, 3], [3, 1]]
    plan.validate()


@pytest.mark.parametrize(("p", "c", "swaps", "bound"), [(16, 4, 42, 38), (32, 8, 78, 67), (8, 2, 27, 27)])
def test_beta_examples_of_the_design(p, c, swaps, bound):
    plan = make_plan("beta", PolicySpec(p, c), seed=3)
    plan.validate()
    assert plan.swaps == beta_swaps(p, c) == swaps
    assert swap_lower_bound(p, c) == bound
    assert plan.num_states == swaps + 1  # one partition per transition


def test_beta_swap_formula_for_all_p_c_up_to_64():
    """For all 2 <= c < p <= 64: the plan's swaps equal the closed form, which is >= the lower bound."""
    rng = np.random.default_rng(0)
    for p in range(3, 65):
        for c in range(2, p):
            offsets, slots, units = beta_walk(p, c, rng)
            swaps = len(units) - c
            x = (p - c) // (c - 1)
            formula = (p - c) + (x + 1) * ((p - c) - x * (c - 1) / 2)
            assert swaps == formula == beta_swaps(p, c), (p, c)
            assert swaps >= swap_lower_bound(p, c) == -(-(p * (p - 1) / 2 - c * (c - 1) / 2) // (c - 1)), (p, c)


@pytest.mark.parametrize("p,c", [(5, 2), (9, 3), (12, 5), (20, 7)])
def test_beta_plans_cover_every_pair(p, c):
    plan = make_plan("beta", PolicySpec(p, c), seed=p * c)
    plan.validate()  # every bucket in a state holding both partitions, no duplicate, capacity respected
    met = np.zeros((p, p), dtype=bool)
    for k in range(plan.num_states):
        s = plan.state(k)
        assert len(s) == c
        met[np.ix_(s, s)] = True
    assert met.all()


@pytest.mark.parametrize("name", LP_POLICIES)
@pytest.mark.parametrize("p,c,r", [(16, 4, 2), (24, 8, 4), (7, 3, 1), (6, 8, 1)])
def test_link_prediction_plans_are_valid(name, p, c, r):
    if name == "comet" and (p % r or c % r):
        pytest.skip("ratio must divide p and c")
    plan = make_plan(name, PolicySpec(p, c, fine_to_coarse_ratio=r), seed=1)
    plan.validate()
    counts = plan.state_bucket_counts()
    assert counts.sum() == p * p
    assert np.array_equal(np.bincount(plan.bucket_state().ravel(), minlength=plan.num_states), counts)
    ids, offsets = plan.examples_by_state()
    assert np.array_equal(np.sort(ids), np.arange(p * p))  # every bucket exactly once
    assert offsets[-1] == p * p
    assert plan.partitions_loaded == plan.swaps + len(plan.state(0))
    assert max(len(plan.state(k)) for k in range(plan.num_states)) <= plan.capacity


def test_counts_without_materializing_equal_the_assignment():
    for name in ("comet", "random", "beta"):
        spec = PolicySpec(48, 12, fine_to_coarse_ratio=3 if name == "comet" else 1)
        lazy = make_plan(name, spec, seed=5).state_bucket_counts()
        full = make_plan(name, spec, seed=5).bucket_state()
        assert np.array_equal(lazy, np.bincount(full.ravel(), minlength=len(lazy))), name
        weights = np.arange(48 * 48, dtype=np.float64).reshape(48, 48)
        a = make_plan(name, spec, seed=5).state_bucket_totals(weights)
        assert np.allclose(a, np.bincount(full.ravel(), weights=weights.ravel(), minlength=len(lazy))), name


def test_comet_logical_partitions_and_random_assignment():
    p, c, r = 32, 8, 4
    plan = make_plan("comet", PolicySpec(p, c, fine_to_coarse_ratio=r), seed=7)
    plan.validate()
    assert plan.unit_partitions.shape == (p // r, r)
    # BETA over l = 8 logical partitions with capacity 2, r partitions per logical swap
    assert plan.swaps == beta_swaps(p // r, c // r) * r
    for t in plan.iter_transitions():
        if t.index:
            assert len(t.partitions_loaded) == r  # whole logical partitions move
    # groups are regenerated every epoch; the plan is deterministic in (seed, epoch)
    again = make_plan("comet", PolicySpec(p, c, fine_to_coarse_ratio=r), seed=7)
    other = make_plan("comet", PolicySpec(p, c, fine_to_coarse_ratio=r), seed=7, epoch=1)
    assert np.array_equal(plan.unit_partitions, again.unit_partitions)
    assert np.array_equal(plan.bucket_state(), again.bucket_state())
    assert not np.array_equal(np.sort(plan.unit_partitions, 1), np.sort(other.unit_partitions, 1))
    # uniform: a bucket whose pair is co-resident in several states does not always go to the first one
    first_of = np.full((p, p), -1)
    for k in range(plan.num_states - 1, -1, -1):
        s = plan.state(k)
        first_of[np.ix_(s, s)] = k
    assert (plan.bucket_state() != first_of).mean() > 0.05


def test_comet_uniform_is_uniform_over_eligible_states():
    """Pooled over seeds, a bucket co-resident in n states lands in each with frequency ~1/n."""
    spec = PolicySpec(8, 4, fine_to_coarse_ratio=2)
    hits = {}
    for seed in range(200):
        plan = make_plan("comet", spec, seed=seed, randomize=False)  # fixed states and groups, fresh draws
        bs = plan.bucket_state()
        hits.setdefault("b", []).append(bs[0, 1])
    plan = make_plan("comet", spec, randomize=False)
    eligible = [k for k in range(plan.num_states) if {0, 1} <= set(plan.state(k).tolist())]
    freq = np.bincount(hits["b"], minlength=plan.num_states)[eligible] / 200
    assert len(eligible) >= 2 and np.all(np.abs(freq - 1 / len(eligible)) < 0.15)


def test_random_policy_is_worse_than_beta():
    spec = PolicySpec(64, 8)
    beta = make_plan("beta", spec)
    rand = make_plan("random", spec)
    rand.validate()
    assert rand.num_states == 16 * 15 // 2  # all pairs of 16 groups of 4
    assert rand.swaps > beta.swaps


def test_in_memory_single_state():
    plan = make_plan("in_memory", PolicySpec(8, 2))
    assert plan.num_states == 1 and plan.swaps == 0 and plan.capacity == 8
    assert (plan.bucket_state() == 0).all()


def _nc_spec(p=16, c=4, r=2, n=500, high=None, seed=0):
    parts = np.random.default_rng(seed).integers(0, high or p, n)
    return PolicySpec(p, c, task="node_classification", fine_to_coarse_ratio=r, train_partitions=parts)


@pytest.mark.parametrize("name", NC_POLICIES)
def test_node_classification_plans_use_every_training_node_once(name):
    spec = _nc_spec(high=3 if name.startswith("sequential") else None)
    plan = make_plan(name, spec, seed=2)
    plan.validate()  # each node's state holds its partition
    assert plan.node_state.shape == (500,)
    ids, offsets = plan.examples_by_state()
    assert np.array_equal(np.sort(ids), np.arange(500)) and offsets[-1] == 500


def test_sequential_keeps_training_partitions():
    plan = make_plan("sequential", _nc_spec(p=16, c=5, high=3), seed=1)
    assert plan.num_states == 1
    state = plan.state(0).tolist()
    assert state[:3] == [0, 1, 2] and len(set(state)) == 5
    with pytest.raises(ConfigError, match="capacity"):
        make_plan("sequential", _nc_spec(p=16, c=2, high=3))


def test_dispersed_one_pass_of_logical_partitions():
    plan = make_plan("dispersed", _nc_spec(p=16, c=4, r=2), seed=3)
    assert plan.num_states == 8 - 2 + 1  # l - c/r transitions after the fill
    assert plan.swaps == (8 - 2) * 2
    seen = set()
    for k in range(plan.num_states):
        seen |= set(plan.state(k).tolist())
    assert seen == set(range(16))


def test_bad_specs_are_one_line_config_errors():
    with pytest.raises(ConfigError, match="policy.num_partitions"):
        PolicySpec(0, 2)
    with pytest.raises(ConfigError, match="policy.task"):
        PolicySpec(4, 2, task="regression")
    with pytest.raises(ConfigError, match="policy.train_partitions"):
        PolicySpec(4, 2, task="node_classification")
    with pytest.raises(ConfigError, match="policy.train_partitions"):
        PolicySpec(4, 2, task="node_classification", train_partitions=np.array([0, 4]))
    with pytest.raises(ConfigError, match="fine_to_coarse_ratio"):
        make_plan("comet", PolicySpec(16, 6, fine_to_coarse_ratio=4))
    with pytest.raises(ConfigError, match="capacity"):
        make_plan("beta", PolicySpec(16, 1))
    with pytest.raises(ConfigError, match="does not support"):
        make_plan("sequential", PolicySpec(16, 4))
    with pytest.raises(ConfigError, match="unknown policy"):
        make_plan("nope", PolicySpec(16, 4))


def test_validate_catches_a_broken_plan():
    plan = make_plan("beta", PolicySpec(4, 2), randomize=False)
    broken = BufferPlan(**{**plan.__dict__, "load_units": np.array([0, 1, 2, 2, 1, 3], dtype=np.int32)})
    broken = BufferPlan(**{f: getattr(broken, f) for f in BufferPlan.__dataclass_fields__})
    with pytest.raises(DataError, match="already in the buffer"):
        broken.validate()


@pytest.mark.slow
def test_hyperlink_scale_plans_are_fast():
    import time

    for name, r in (("beta", 1), ("comet", 16), ("random", 1)):
        started = time.perf_counter()
        plan = make_plan(name, PolicySpec(8192, 1024, fine_to_coarse_ratio=r))
        assert plan.state_bucket_counts().sum() == 8192 ** 2
        assert time.perf_counter() - started < 30, name
    assert make_plan("beta", PolicySpec(8192, 1024)).swaps == beta_swaps(8192, 1024)


def test_sequential_rotation_rotates_the_free_slots_through_every_other_partition():
    """p = 16, c = 4, training nodes in partition 0: w = 3 free slots, n = 15 others, so every other partition has
    been in the buffer after ceil(15 / 3) = 5 epochs, each epoch taking the next 3 of one seeded permutation."""
    spec = _nc_spec(p=16, c=4, high=1)
    states = [make_plan("sequential_rotation", spec, seed=7, epoch=epoch).state(0).tolist() for epoch in range(6)]
    assert all(state[0] == 0 and len(set(state)) == 4 for state in states)
    fills = [state[1:] for state in states]
    assert sorted(sum(fills[:5], [])) == list(range(1, 16))  # each other partition exactly once in 5 epochs
    assert fills[5] == fills[0]  # then the rotation starts over
    assert states == [make_plan("sequential_rotation", spec, seed=7, epoch=epoch).state(0).tolist()
                      for epoch in range(6)]
    assert states != [make_plan("sequential_rotation", spec, seed=8, epoch=epoch).state(0).tolist()
                      for epoch in range(6)]


def test_sequential_draws_the_free_slots_afresh_every_epoch():
    """MariusGNN's SEQUENTIAL: the training partitions stay; the c - |train| other slots are a uniform draw without
    replacement, fresh every epoch: p = 64, c = 16, training in partition 0, 15 free slots over 63 others."""
    spec = _nc_spec(p=64, c=16, high=1)
    states = [make_plan("sequential", spec, seed=3, epoch=epoch).state(0).tolist() for epoch in range(400)]
    assert all(state[0] == 0 and len(set(state)) == 16 for state in states)
    fills = [frozenset(state[1:]) for state in states]
    assert len(set(fills)) == len(fills)  # no two epochs draw the same set (C(63, 15) sets)
    counts = np.bincount(np.concatenate([sorted(f) for f in fills]), minlength=64)[1:]
    expected = 400 * 15 / 63  # each other partition in 15/63 of the epochs
    assert counts.min() > 0.6 * expected and counts.max() < 1.4 * expected  # about 4.5 standard deviations of the binomial
    again = [make_plan("sequential", spec, seed=3, epoch=epoch).state(0).tolist() for epoch in range(3)]
    assert again == states[:3]
    assert again != [make_plan("sequential", spec, seed=4, epoch=epoch).state(0).tolist() for epoch in range(3)]


def test_sequential_neighborhood_pins_the_first_half_of_the_free_slots():
    """p = 16, c = 5, training nodes in partition 0: w = 4 free slots; partitions 1 and 2 (ceil(4 / 2), the
    training nodes' neighbourhood under a neighborhood-first order) in every epoch, the other 2 slots a uniform
    draw from 3 .. 15, fresh every epoch; p = 16, c = 6: ceil(5 / 2) = 3 pinned."""
    spec = _nc_spec(p=16, c=5, high=1)
    states = [make_plan("sequential_neighborhood", spec, seed=3, epoch=epoch).state(0).tolist() for epoch in range(300)]
    assert all(sorted(state)[:3] == [0, 1, 2] and len(set(state)) == 5 for state in states)
    fills = [frozenset(sorted(state)[3:]) for state in states]
    assert set().union(*fills) == set(range(3, 16)) and len(set(fills)) > 40  # all 78 pairs drawn about 4 times
    assert sorted(make_plan("sequential_neighborhood", _nc_spec(p=16, c=6, high=1), seed=3).state(0).tolist())[:4] == \
        [0, 1, 2, 3]
    plan = make_plan("sequential_neighborhood", spec, seed=3)
    plan.validate()
    assert plan.num_states == 1 and (plan.node_state == 0).all()


@pytest.mark.parametrize("fill", [random_fill, rotation_window])
def test_the_free_slots_prefer_resident_partitions(fill):
    others = np.arange(1, 16)
    assert fill(others, 3, seed=0, epoch=0, resident=np.array([0, 9, 4, -1, 12])).tolist() == [4, 9, 12]
    partly = fill(others, 3, seed=0, epoch=0, resident=np.array([0, 9]))
    assert partly[0] == 9 and len(set(partly.tolist())) == 3 and 0 not in partly
    assert fill(others, 0, seed=0, epoch=0).size == 0


# ------------------------------------------------------------------ MariusGNN's ordering.cpp, by hand
# getDispersedNodePartitionOrdering (marius-team/marius, src/cpp/src/data/ordering.cpp): randperm(l) puts the first
# l_c coarse partitions in the buffer; then, while some are on disk, it shuffles the buffer and the disk, replaces
# the buffer's last entry by the disk's first, and drops that one from the disk (the evicted partition never comes
# back). Fine partitions: randperm(p) cut into groups of r. Training nodes: each to a uniformly random state holding
# its partition. getSequentialNodePartitionOrdering: one state, partitions 0 .. t-1 (t = last training partition
# + 1) followed by the first c - t of a random permutation of the others; every training node in it.
def _state_sets(plan: BufferPlan) -> tuple[frozenset, ...]:
    return tuple(frozenset(plan.state(k).tolist()) for k in range(plan.num_states))


def test_dispersed_p3_c2_is_ordering_cpps_six_sequences_uniformly():
    """p = 3, c = 2, r = 1: ordering.cpp's states are {a, b} then {a or b, c} for a uniformly random pair {a, b} and
    a uniformly random evicted one: 3 x 2 = 6 sequences, each with probability 1/6; nothing else occurs."""
    spec = PolicySpec(3, 2, task="node_classification", train_partitions=np.array([0, 1, 2]))
    runs = 1200
    sequences = [_state_sets(make_plan("dispersed", spec, seed=seed)) for seed in range(runs)]
    by_hand = {(frozenset({a, b}), frozenset({kept, c}))
               for a, b, c in ((0, 1, 2), (0, 2, 1), (1, 2, 0)) for kept in (a, b)}
    assert set(sequences) == by_hand
    counts = np.array([sequences.count(sequence) for sequence in by_hand])
    assert counts.min() > 0.7 * runs / 6 and counts.max() < 1.3 * runs / 6  # ~4 standard deviations


def test_dispersed_p4_c2_swaps_one_partition_per_state_and_never_reloads():
    """p = 4, c = 2: 3 states; each after the first evicts one partition (uniformly: each resident one half of the
    time) and loads one never loaded before; every partition is loaded exactly once."""
    spec = PolicySpec(4, 2, task="node_classification", train_partitions=np.arange(4))
    survivor_evicted = 0
    for seed in range(400):
        plan = make_plan("dispersed", spec, seed=seed)
        states = _state_sets(plan)
        assert len(states) == 3 and all(len(state) == 2 for state in states)
        loads = [plan.transition(k).partitions_loaded.tolist() for k in range(3)]
        assert len(loads[0]) == 2 and len(loads[1]) == len(loads[2]) == 1
        assert sorted(sum(loads, [])) == [0, 1, 2, 3]
        (survivor,) = states[1] - set(loads[1])  # the partition of state 0 still resident in state 1
        survivor_evicted += survivor not in states[2]
    assert 0.4 < survivor_evicted / 400 < 0.6  # 400 fair coins: ~4 standard deviations


def test_dispersed_assigns_each_training_node_uniformly_among_the_states_holding_it():
    """p = 3, c = 2 (two states): the nodes of the partition in both states go to each with probability 1/2; those
    of a partition in one state go there."""
    nodes = np.repeat(np.arange(3), 300)
    spec = PolicySpec(3, 2, task="node_classification", train_partitions=nodes)
    plan = make_plan("dispersed", spec, seed=5)
    states = _state_sets(plan)
    both = next(iter(states[0] & states[1]))
    only_first = next(iter(states[0] - states[1]))
    assigned = plan.node_state
    assert (assigned[nodes == only_first] == 0).all()
    assert (assigned[nodes == next(iter(states[1] - states[0]))] == 1).all()
    assert 0.4 < assigned[nodes == both].mean() < 0.6  # 300 nodes, fair coin: ~3.5 standard deviations


def test_dispersed_r2_moves_random_pairs_of_partitions():
    """p = 8, c = 4, r = 2: l = 4 coarse partitions of 2 fine ones (a random pairing), 2 in the buffer: 3 states of 4
    partitions; consecutive states share exactly one pair."""
    spec = PolicySpec(8, 4, task="node_classification", fine_to_coarse_ratio=2, train_partitions=np.arange(8))
    pairings = set()
    for seed in range(50):
        plan = make_plan("dispersed", spec, seed=seed)
        states = _state_sets(plan)
        assert len(states) == 3 and all(len(state) == 4 for state in states)
        assert len(states[0] & states[1]) == 2 and len(states[1] & states[2]) == 2
        assert frozenset().union(*states) == frozenset(range(8))
        pairings.add(frozenset(frozenset(unit[unit >= 0].tolist()) for unit in plan.unit_partitions))
    assert len(pairings) > 10  # fresh random groups (105 pairings of 8)


def test_sequential_is_ordering_cpps_training_prefix_and_a_uniform_fill():
    """p = 5, c = 3, training nodes in partitions 0 and 1 (a train-first order): one state {0, 1, x} with x uniform
    over {2, 3, 4}, every training node in it; p = 5, c = 3, training in partition 0: {0, x, y}, the pair uniform
    over the 6 pairs of {1, 2, 3, 4}."""
    spec = PolicySpec(5, 3, task="node_classification", train_partitions=np.array([0, 1, 1, 0]))
    states = [make_plan("sequential", spec, seed=1, epoch=epoch).state(0).tolist() for epoch in range(600)]
    assert all(state[:2] == [0, 1] and len(state) == 3 for state in states)
    counts = np.bincount([state[2] for state in states], minlength=5)
    assert counts[:2].sum() == 0 and counts[2:].min() > 0.8 * 200 and counts[2:].max() < 1.2 * 200
    plan = make_plan("sequential", spec, seed=1)
    assert plan.num_states == 1 and (plan.node_state == 0).all()
    spec = PolicySpec(5, 3, task="node_classification", train_partitions=np.array([0, 0]))
    pairs = [frozenset(make_plan("sequential", spec, seed=2, epoch=epoch).state(0).tolist()[1:])
             for epoch in range(600)]
    assert len(set(pairs)) == 6
    pair_counts = np.array([pairs.count(pair) for pair in set(pairs)])
    assert pair_counts.min() > 0.7 * 100 and pair_counts.max() < 1.3 * 100
