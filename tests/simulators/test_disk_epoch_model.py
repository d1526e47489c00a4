"""Disk-system epoch simulator: the serial and prefetch schedules by hand, the recurrence against SimPy, the work of
a plan by hand, calibration recovering the costs of a timeline the model wrote (its reads one after another or
concurrent; two runs pooled where neither alone identifies the compute), bad input."""

from __future__ import annotations

import numpy as np
import pytest

from simulators.disk_epoch_model import (DiskCosts, PassWork, StateSeconds, StoreSizes, calibrate, calibrate_pooled,
                                         compute_rank, load_factor, plan_work, predict, read_seconds, simulate_epochs,
                                         simulate_epochs_simpy, state_seconds)
from suite.errors import ConfigError, DataError
from systems.disk.policies import PolicySpec, make_plan


def three_states(read_bytes=(1.0, 2.0, 3.0), examples=(4.0, 1.0, 5.0), flush=0.0) -> PassWork:
    """Three states reading ``read_bytes`` (partition bytes, no buckets, no edges), ``examples`` of compute."""
    zeros = np.zeros(3)
    return PassWork(partition_bytes=np.asarray(read_bytes), partition_reads=zeros, bucket_bytes=zeros,
                    bucket_reads=zeros, edges=zeros, examples=np.asarray(examples), batches=np.ones(3),
                    flush_bytes=flush)


UNIT = DiskCosts(read_bandwidth=1.0, compute_example_s=1.0)  # 1 byte/s; 1 s per example


def test_three_states_serial_is_the_sum_and_prefetch_the_max_recurrence():
    """P = 1, 2, 3 s; C = 4, 1, 5 s. Serial: 6 + 10 = 16 s. Prefetch: ready_0 = 1, ready_1 = max(1 + 4, 1 + 2) = 5,
    ready_2 = max(5 + 1, 5 + 3) = 8, end = 8 + 5 = 13 s."""
    seconds = state_seconds(three_states(), UNIT)
    assert np.allclose(seconds.prepare, [1, 2, 3]) and np.allclose(seconds.compute, [4, 1, 5])
    assert simulate_epochs([seconds], prefetch=False, carry=False)[0] == pytest.approx(16.0)
    assert simulate_epochs([seconds], prefetch=True, carry=False)[0] == pytest.approx(13.0)


def test_carry_overlaps_the_next_pass_first_prepare_with_the_last_compute():
    """Two passes of the three states, gap 0.5 s, overhead 0.25 s. Pass 0 ends at 13 (ready_2 = 8). Carried, pass
    1's first prepare runs 8 -> 9, before its wait at 13.5: ready_0 = 13.5, then 17.5, 20.5, end 25.5: 12 s + 0.25.
    Not carried: ready_0 = 14.5, end 26.5 (13 s + 0.25). A first prepare of 9 s carried runs 8 -> 17: ready_0 = 17,
    then 21, 24, end 29 (15.5 s); not carried 13.5 + 9 = 22.5, 26.5, 29.5, end 34.5 (21 s). A flush of 2 bytes at
    0.5 byte/s adds 4 s."""
    seconds = state_seconds(three_states(), UNIT)
    carried = simulate_epochs([seconds, seconds], prefetch=True, carry=True, epoch_overhead_s=0.25, pass_gap_s=0.5)
    assert np.allclose(carried, [13.25, 12.25])
    assert np.allclose(simulate_epochs([seconds, seconds], True, False, 0.25, 0.5), [13.25, 13.25])
    slow_first = StateSeconds(np.array([9.0, 2.0, 3.0]), seconds.compute)  # carried prepare 8 -> 17 > 13.5
    assert np.allclose(simulate_epochs([seconds, slow_first], True, True, 0.0, 0.5), [13.0, 15.5])
    assert np.allclose(simulate_epochs([seconds, slow_first], True, False, 0.0, 0.5), [13.0, 21.0])
    flushing = state_seconds(three_states(flush=2.0), DiskCosts(read_bandwidth=1.0, compute_example_s=1.0,
                                                                 write_bandwidth=0.5))
    assert flushing.flush == pytest.approx(4.0)
    assert np.allclose(simulate_epochs([flushing], True, False), [17.0])


@pytest.mark.parametrize("prefetch,carry", [(False, False), (True, False), (True, True)])
def test_the_recurrence_is_the_simpy_schedule(prefetch, carry):
    rng = np.random.default_rng(3)
    passes = [StateSeconds(rng.exponential(1.0, S), rng.exponential(1.0, S), float(rng.exponential(0.2)))
              for S in (1, 5, 12, 7)]
    expected = simulate_epochs(passes, prefetch, carry, 0.1, 0.3)
    assert np.allclose(simulate_epochs_simpy(passes, prefetch, carry, 0.1, 0.3), expected)


def test_work_of_a_beta_plan_by_hand():
    """BETA p = 4, c = 2 (not relabelled): states (0,1) (0,2) (0,3) (1,3) (1,2) (3,2). Partitions of 10, 20, 30,
    40 bytes; one edge per bucket (1 byte), buckets 0 rows apart merged, so a state reads its new buckets as runs
    of adjacent bucket ids."""
    plan = make_plan("beta", PolicySpec(4, 2, task="link_prediction"), randomize=False)
    assert plan.states == ((0, 1), (0, 2), (0, 3), (1, 3), (1, 2), (3, 2))
    sizes = StoreSizes(partition_bytes=np.array([10.0, 20, 30, 40]), bucket_edges=np.ones((4, 4)), edge_bytes=1.0,
                       learnable=True)
    work, = plan_work([plan], sizes, batch_size=2, keeps_resident=False)
    assert work.partition_bytes.tolist() == [30, 30, 40, 20, 30, 40]
    assert work.partition_reads.tolist() == [1, 1, 1, 1, 1, 1]
    # bucket (i, j) is id 4i + j. State 0 reads 0,1,4,5: extents [0,2) [4,6); state 1 adds (0,2) (2,0) (2,2): ids
    # 2, 8, 10, three extents; state 4 (1,2) after (1,3) adds 6, 9, 10: [6] [9,11), two; state 5 adds 11, 14, 15
    assert work.bucket_bytes.tolist() == [4, 3, 3, 3, 3, 3]
    assert work.bucket_reads.tolist() == [2, 3, 3, 3, 2, 2]
    assert work.edges.tolist() == [4] * 6
    assert work.examples.tolist() == [4, 3, 3, 2, 2, 2] and work.batches.tolist() == [2, 2, 2, 1, 1, 1]
    assert work.flush_bytes == 70  # partitions 3 and 2 resident at the end
    merged, = plan_work([plan], StoreSizes(sizes.partition_bytes, sizes.bucket_edges, 1.0, coalesce_rows=2),
                        batch_size=2, keeps_resident=False)
    # a gap of 2 rows is merged: state 0 reads [0, 6) in one extent (rows 2, 3 too); state 1: [2] and [8, 11)
    assert merged.bucket_reads.tolist()[:2] == [1, 2] and merged.bucket_bytes.tolist()[:2] == [6, 4]


def test_resident_partitions_are_not_read_again_in_the_next_pass():
    plan = make_plan("beta", PolicySpec(4, 2, task="link_prediction"), randomize=False)
    sizes = StoreSizes(np.full(4, 10.0), np.ones((4, 4)), edge_bytes=1.0)
    first, second = plan_work([plan, plan], sizes, batch_size=10, keeps_resident=True)
    # the second pass starts holding (3, 2): its state (0, 1) reads both partitions and 4 buckets anyway
    assert second.partition_bytes[0] == 20
    resident = plan_work([plan, make_plan("in_memory", PolicySpec(4, 4, task="link_prediction"))],
                         sizes, batch_size=10, keeps_resident=True)[1]
    assert resident.partition_bytes.tolist() == [20]  # 3 and 2 stay: only 0 and 1 are read
    assert resident.bucket_bytes.tolist() == [12]  # every bucket but those between 2 and 3


def timeline_records(work: list[PassWork], costs: DiskCosts) -> tuple[list[dict], list[dict]]:
    """The ``state`` and ``epoch`` records of the prefetching schedule of ``work`` on ``costs`` (no carry): a
    state's reads as equal events whose durations follow the latency and bandwidth, its build at the CSR cost."""
    states, epochs, t = [], [], 0.0
    for e, w in enumerate(work):
        seconds = state_seconds(w, costs)
        wait = t
        ready = wait + seconds.prepare[0]
        entered = []
        for k in range(w.num_states):
            if k:
                ready = max(ready + seconds.compute[k - 1], ready + seconds.prepare[k])
            entered.append(ready)
        for k in range(w.num_states):
            submitted = entered[k - 1] if k else wait
            n = int(w.read_ops[k])
            read_s = costs.read_latency_s + w.read_bytes[k] / n / costs.read_bandwidth  # each of its n reads
            build_end = submitted + seconds.prepare[k]
            states.append({"kind": "state", "pass": "train", "epoch": e, "state": k,
                           "reads": [{"bytes": float(w.read_bytes[k] / n), "start": submitted + i * read_s,
                                      "end": submitted + (i + 1) * read_s} for i in range(n)],
                           "build_start": build_end - w.edges[k] * costs.build_per_edge_s, "build_end": build_end,
                           "build_ahead": k > 0,
                           "wait_start": wait if k == 0 else entered[k - 1] + seconds.compute[k - 1],
                           "wait_end": entered[k], "compute_start": entered[k],
                           "compute_end": entered[k] + seconds.compute[k], "batches": int(w.batches[k])})
        end = entered[-1] + seconds.compute[-1]
        epochs.append({"kind": "epoch", "epoch": e, "epoch_time_s": end - wait + costs.epoch_overhead_s})
        t = end + costs.pass_gap_s
    return states, epochs


def test_calibration_recovers_the_costs_of_a_timeline_the_model_wrote():
    rng = np.random.default_rng(0)
    truth = DiskCosts(read_bandwidth=1e8, read_latency_s=1e-3, build_per_edge_s=1e-7, hold_per_edge_s=2e-7,
                      hold_per_byte_s=1e-9, compute_state_s=0.02, compute_batch_s=0.05, epoch_overhead_s=0.04,
                      pass_gap_s=0.1)
    work = []
    for _ in range(4):
        S = 6
        work.append(PassWork(partition_bytes=rng.uniform(1e6, 5e7, S), partition_reads=rng.integers(1, 4, S) * 1.0,
                             bucket_bytes=rng.uniform(0, 1e6, S), bucket_reads=rng.integers(1, 5, S) * 1.0,
                             edges=rng.uniform(1e5, 2e6, S), examples=rng.integers(0, 3000, S) * 1.0,
                             batches=rng.integers(1, 4, S) * 1.0))
    states, epochs = timeline_records(work, truth)
    fitted = calibrate(states, epochs, work, prefetch=True)
    for name in ("read_bandwidth", "read_latency_s", "build_per_edge_s", "hold_per_edge_s", "hold_per_byte_s",
                 "compute_state_s", "compute_batch_s", "epoch_overhead_s"):
        assert getattr(fitted, name) == pytest.approx(getattr(truth, name), rel=1e-3, abs=1e-12), name
    predicted = predict(work, fitted, prefetch=True, keeps_resident=False).epoch_time_s
    assert np.allclose(predicted, [r["epoch_time_s"] for r in epochs], rtol=1e-6)


def test_a_run_with_half_the_cores_left_takes_twice_as_long():
    """Calibrated with 0.3 of 2 cores left by other processes, predicted for a run that had 0.15: factor 2, the
    three states' 13 s (prefetch) and 16 s (serial) become 26 s and 32 s."""
    factor = load_factor(1.7, 1.85, cores=2.0)
    assert factor == pytest.approx(2.0)
    assert load_factor(1.0, 2.5, cores=2.0, min_cores=0.1) == pytest.approx(10.0)  # at least min_cores left
    prediction = predict([three_states()], UNIT.slowed(factor), prefetch=True, keeps_resident=False)
    assert prediction.epoch_time_s.tolist() == pytest.approx([26.0])
    assert prediction.serial_s.tolist() == pytest.approx([32.0])
    with pytest.raises(ConfigError, match="slowdown"):
        UNIT.slowed(0.0)


def test_warm_up_lengthens_the_first_state_only():
    costs = DiskCosts(read_bandwidth=1.0, compute_example_s=1.0, warmup_compute_s=2.0, warmup_prepare_s=1.0)
    prediction = predict([three_states(), three_states()], costs, prefetch=False, keeps_resident=False)
    assert prediction.epoch_time_s.tolist() == pytest.approx([19.0, 16.0])


def test_bad_input_names_the_field():
    with pytest.raises(ConfigError, match="read_bandwidth"):
        DiskCosts(read_bandwidth=0.0)
    with pytest.raises(ConfigError, match="compute_batch_s"):
        DiskCosts(read_bandwidth=1.0, compute_batch_s=-1.0)
    with pytest.raises(ConfigError, match="bucket_edges"):
        StoreSizes(np.ones(3), np.ones((2, 2)))
    with pytest.raises(ConfigError, match="batch_size"):
        plan_work([], StoreSizes(np.ones(2), np.ones((2, 2))), batch_size=0, keeps_resident=False)


def test_concurrent_reads_are_priced_by_the_time_the_state_spent_reading():
    """The system reads a state's runs concurrently (read_threads): the same timeline with each state's reads
    issued at once, every event spanning the whole read, calibrates to the same costs (the events' summed
    durations would be n times the state's read time)."""
    rng = np.random.default_rng(1)
    truth = DiskCosts(read_bandwidth=2e8, read_latency_s=2e-3, build_per_edge_s=1e-7, compute_batch_s=0.03,
                      epoch_overhead_s=0.01)
    work = [PassWork(partition_bytes=rng.uniform(1e6, 5e7, 5), partition_reads=rng.integers(2, 6, 5) * 1.0,
                     bucket_bytes=np.zeros(5), bucket_reads=np.zeros(5), edges=rng.uniform(1e5, 1e6, 5),
                     examples=rng.integers(100, 3000, 5) * 1.0, batches=rng.integers(1, 4, 5) * 1.0)
            for _ in range(4)]
    states, epochs = timeline_records(work, truth)
    for state in states:
        start, end = state["reads"][0]["start"], state["reads"][-1]["end"]
        state["reads"] = [{**read, "start": start, "end": end} for read in state["reads"]]
    fitted = calibrate(states, epochs, work, prefetch=True)
    for name in ("read_bandwidth", "read_latency_s", "build_per_edge_s", "compute_batch_s"):
        assert getattr(fitted, name) == pytest.approx(getattr(truth, name), rel=1e-3, abs=1e-12), name


def test_read_seconds_counts_overlapping_reads_once():
    reads = [{"start": 0.0, "end": 2.0}, {"start": 1.0, "end": 3.0}, {"start": 5.0, "end": 6.0},
             {"start": 5.5, "end": 5.8}]
    assert read_seconds(reads) == pytest.approx(4.0)
    assert read_seconds([]) == 0.0


def test_two_runs_pooled_identify_the_compute_neither_identifies_alone():
    """Run A: one state per epoch, the same 3 batches and 2500 examples every epoch (compute features of rank 1:
    the fit cannot split its compute). Run B: five states per epoch of varying batches, 100 examples per batch
    (rank 2: per-batch and per-example compute collinear). Pooled, the features have rank 3 and the fit recovers the
    per-state, per-batch and per-example compute (and the other costs), and predicts both runs exactly; A alone
    puts the compute elsewhere and mispredicts B."""
    rng = np.random.default_rng(2)
    truth = DiskCosts(read_bandwidth=1e8, read_latency_s=1e-3, build_per_edge_s=1e-7, hold_per_edge_s=2e-7,
                      hold_per_byte_s=1e-9, compute_state_s=0.02, compute_batch_s=0.05, compute_example_s=1e-5,
                      epoch_overhead_s=0.04, pass_gap_s=0.1)
    one = PassWork(partition_bytes=np.array([3e7]), partition_reads=np.array([2.0]), bucket_bytes=np.array([5e5]),
                   bucket_reads=np.array([1.0]), edges=np.array([1e6]), examples=np.array([2500.0]),
                   batches=np.array([3.0]))
    work_a = [one] * 5
    work_b = []
    for _ in range(5):
        batches = rng.integers(1, 8, 5) * 1.0
        work_b.append(PassWork(partition_bytes=rng.uniform(1e6, 5e7, 5), partition_reads=rng.integers(1, 4, 5) * 1.0,
                               bucket_bytes=rng.uniform(0, 1e6, 5), bucket_reads=rng.integers(1, 5, 5) * 1.0,
                               edges=rng.uniform(1e5, 2e6, 5), examples=100.0 * batches, batches=batches))
    assert (compute_rank([work_a]), compute_rank([work_b]), compute_rank([work_a, work_b])) == (1, 2, 3)
    (states_a, epochs_a), (states_b, epochs_b) = timeline_records(work_a, truth), timeline_records(work_b, truth)
    pooled = calibrate_pooled([(states_a, epochs_a, work_a), (states_b, epochs_b, work_b)], prefetch=True)
    for name in ("compute_state_s", "compute_batch_s", "compute_example_s", "read_bandwidth", "read_latency_s",
                 "build_per_edge_s", "hold_per_edge_s", "hold_per_byte_s", "epoch_overhead_s", "pass_gap_s"):
        assert getattr(pooled, name) == pytest.approx(getattr(truth, name), rel=1e-3, abs=1e-12), name
    for work, epochs in ((work_a, epochs_a), (work_b, epochs_b)):
        predicted = predict(work, pooled, prefetch=True, keeps_resident=False).epoch_time_s
        assert np.allclose(predicted, [r["epoch_time_s"] for r in epochs], rtol=1e-6)
    alone = calibrate(states_a, epochs_a, work_a, prefetch=True)
    assert alone.compute_state_s + 3 * alone.compute_batch_s + 2500 * alone.compute_example_s == pytest.approx(
        truth.compute_state_s + 3 * truth.compute_batch_s + 2500 * truth.compute_example_s, rel=1e-3)  # in sample
    assert alone.compute_state_s != pytest.approx(truth.compute_state_s, rel=0.1)  # but not split
    predicted_b = predict(work_b, alone, prefetch=True, keeps_resident=False).epoch_time_s
    assert not np.allclose(predicted_b, [r["epoch_time_s"] for r in epochs_b], rtol=0.05)
    single = calibrate_pooled([(states_a, epochs_a, work_a)], prefetch=[True])
    assert single == alone  # one run pooled is calibrate


def test_sampled_edges_are_the_workload_count_of_every_state_entered():
    """The count is asked for the states the pass enters, in order, and kept as given; a count of another length is
    an error naming it; link prediction counts none."""
    plan = make_plan("beta", PolicySpec(4, 2, task="link_prediction"), randomize=False)
    sizes = StoreSizes(np.full(4, 10.0), np.ones((4, 4)), edge_bytes=1.0)
    nc_plan = make_plan("dispersed", PolicySpec(4, 2, task="node_classification",
                                                train_partitions=np.array([0, 0, 1, 2, 3, 3])), seed=0, epoch=0)
    asked = []

    def count(given, entered):
        asked.append((given, entered.tolist()))
        return 100.0 + entered

    work = plan_work([nc_plan], sizes, batch_size=4, keeps_resident=True, sampled_edges=count)
    entered = nc_plan.states_with_examples()
    assert asked == [(nc_plan, entered.tolist())] and len(entered) > 1
    assert work[0].sampled_edges.tolist() == (100.0 + entered).tolist()
    with pytest.raises(DataError, match="sampled_edges"):
        plan_work([nc_plan], sizes, batch_size=4, keeps_resident=True, sampled_edges=lambda p, e: np.zeros(1))
    assert plan_work([plan], sizes, batch_size=4, keeps_resident=False,
                     sampled_edges=count)[0].sampled_edges is None  # link prediction: none


def test_compute_costs_follow_the_compute_threads_and_nothing_else_does():
    costs = DiskCosts(read_bandwidth=2.0, read_latency_s=1.0, compute_state_s=1.0, compute_batch_s=2.0,
                      compute_example_s=3.0, compute_edge_s=4.0, warmup_compute_s=5.0, epoch_overhead_s=6.0)
    two = costs.with_compute_threads(2)
    assert two.compute_threads == 2.0 and two.read_bandwidth == 2.0 and two.read_latency_s == 1.0
    assert [two.compute_state_s, two.compute_batch_s, two.compute_example_s, two.compute_edge_s,
            two.warmup_compute_s, two.epoch_overhead_s] == [0.5, 1.0, 1.5, 2.0, 2.5, 6.0]
    assert two.slowed(2.0).compute_threads == 2.0  # a slowdown does not change the threads
    with pytest.raises(ConfigError, match="compute threads"):
        costs.with_compute_threads(0)
