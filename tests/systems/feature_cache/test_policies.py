"""The cache policies on access sequences checked by hand (one row per batch unless said), through the real cache
and reader: Belady's MIN with bypass, LRU, S3-FIFO's small/main/ghost FIFOs, the degree-pinned cache, no cache; on
random traces Belady hits at least as often as every other policy, and each gathered row is the table's."""

from __future__ import annotations

import numpy as np
import pytest

from systems.feature_cache.policies import CACHE_POLICIES, S3Fifo
from tests.support.feature_cache import make_cache, replay, write_table

CLASSIC = [1, 2, 3, 4, 1, 2, 5, 1, 2, 3, 4, 5]  # the textbook page-reference string
CYCLIC = [1, 2, 3, 4] * 3


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    return write_table(tmp_path_factory.mktemp("table"))


def singles(sequence):
    return [[row] for row in sequence]


def test_belady_on_the_classic_string_hits_five_times(table):
    # capacity 3: 1,2,3 admitted; 4 is needed after 1,2,3, so passed over; 1,2 hit; 5 passed over (1,2,3 sooner);
    # 1,2,3 hit; 4 and 5 are never needed again: passed over. Hits at accesses 5, 6, 8, 9, 10.
    hits = replay(make_cache(table[0], "belady", 3), table[1], singles(CLASSIC))
    assert hits == [0, 0, 0, 0, 1, 1, 0, 1, 1, 1, 0, 0]


def test_lru_on_the_classic_string_hits_twice(table):
    # capacity 3: after 1,2,3 every miss evicts the oldest; only 1 and 2 at accesses 8 and 9 are still held.
    hits = replay(make_cache(table[0], "lru", 3), table[1], singles(CLASSIC))
    assert hits == [0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0]


def test_on_a_cycle_one_longer_than_the_cache_lru_never_hits_and_belady_keeps_three_of_four(table):
    assert sum(replay(make_cache(table[0], "lru", 3), table[1], singles(CYCLIC))) == 0
    belady = replay(make_cache(table[0], "belady", 3), table[1], singles(CYCLIC))
    assert belady == [0, 0, 0, 0, 1, 1, 1, 0, 1, 1, 1, 0]


def test_belady_with_a_window_of_one_next_batch_still_keeps_what_comes_next(table):
    # window 2 (this batch and the next): at each miss of the cycle the next row is held and stays; the two others
    # tie (not needed within the window) and stay as held rows: the miss is passed over.
    belady = replay(make_cache(table[0], "belady", 3), table[1], singles(CYCLIC), lookahead=2)
    assert belady == [0, 0, 0, 0, 1, 1, 1, 0, 1, 1, 1, 0]


def test_s3fifo_admits_to_the_small_fifo_promotes_on_two_hits_and_readmits_ghosts_to_main(table):
    # capacity 10: small FIFO of 1 row, main of 9, ghost of 9.
    sequence = [1, 1, 2, 1, 1, 3, 2, 3,  # 1 hit once in small -> ghost when 2 comes; back as a ghost -> main (hit)
                7, 7, 7, 8, 7]           # 7 hit twice in small -> promoted to main when 8 comes: still held
    hits = replay(make_cache(table[0], "s3fifo", 10), table[1], singles(sequence))
    assert hits == [0, 1, 0, 0, 1, 0, 0, 1,
                    0, 1, 1, 0, 1]


def test_s3fifo_main_fifo_gives_hit_rows_another_round(table):
    # capacity 3: small FIFO 1 row, main 2, ghost 2. 1 and 9 pass through small to the ghost and come back to main;
    # 2 hits in small (t6) but only once, so it leaves for the ghost when 3 comes (t8). In main, 1 is hit twice (t7,
    # t11) and 9 once (t9). 2 returns as a ghost (t12): main is full and goes round, each row's frequency one less,
    # until a row at 0 is found: 9 (1 had 2). So 1 still hits at t13, 9 misses at t14.
    sequence = [1, 9, 1, 2, 9, 2, 1, 3, 9, 3, 1, 2, 1, 9]
    hits = replay(make_cache(table[0], "s3fifo", 3), table[1], singles(sequence))
    assert hits == [0, 0, 0, 0, 0, 1, 1, 0, 1, 1, 1, 0, 1, 0]


def test_static_degree_pins_the_highest_degrees_and_keeps_nothing_else(table):
    degrees = np.zeros(64, dtype=np.int64)
    degrees[[2, 4, 7]] = [9, 9, 5]  # capacity 2: rows 2 and 4 (ties by id)
    cache = make_cache(table[0], "static_degree", 2, degrees=degrees)
    hits = replay(cache, table[1], [[2, 3], [4, 0, 0], [2, 4, 7], [7]])
    assert hits == [1, 1, 2, 0]
    assert sorted(cache.row_of_slot.tolist()) == [2, 4]
    assert cache.stats.misses == 4  # 3, 0 (once: distinct rows per batch), 7, 7


def test_none_reads_every_row_of_every_batch(table):
    cache = make_cache(table[0], "none", 16)
    hits = replay(cache, table[1], [[1, 2, 2], [1, 2], [1]])
    assert hits == [0, 0, 0] and cache.stats.misses == 5 and cache.capacity == 0
    assert cache.reader.stats.rows == 5


def test_a_batch_counts_each_distinct_row_once_and_lru_keeps_the_first_misses_when_it_overflows(table):
    cache = make_cache(table[0], "lru", 2)
    hits = replay(cache, table[1], [[5, 6, 7, 5], [5, 6], [7]])
    assert hits == [0, 2, 0] and cache.stats.misses == 4


def random_trace(seed: int, batches: int = 40, rows: int = 64, size: int = 12) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, rows + 1) ** 0.8  # skewed, as sampled neighbourhoods are
    return [rng.choice(rows, size=size, p=weights / weights.sum()).tolist() for _ in range(batches)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_belady_hits_at_least_as_often_as_every_other_policy(table, seed):
    trace = random_trace(seed)
    degrees = np.bincount(np.concatenate(trace), minlength=64)  # the best static choice in hindsight
    totals = {name: sum(replay(make_cache(table[0], name, 16, degrees=degrees), table[1], trace))
              for name in CACHE_POLICIES.names()}
    assert totals["none"] == 0
    assert all(totals["belady"] >= hits for hits in totals.values()), totals
    assert totals["belady"] > totals["lru"]


def test_s3fifo_slots_agree_with_the_cache_after_batches_that_overflow_the_small_fifo(table):
    cache = make_cache(table[0], "s3fifo", 20)
    replay(cache, table[1], random_trace(3, batches=60, size=20))
    policy = cache.policy
    assert isinstance(policy, S3Fifo)
    assert np.array_equal(policy.row_of_slot, cache.row_of_slot)
    held = cache.row_of_slot[cache.row_of_slot >= 0]
    assert np.array_equal(cache.slot_of_row[held], np.flatnonzero(cache.row_of_slot >= 0))
    assert (cache.slot_of_row >= 0).sum() == len(held)


@pytest.mark.parametrize("policy", ["belady", "lru", "s3fifo"])
def test_a_float16_table_with_rows_across_block_bounds_is_served_exactly(tmp_path, policy):
    # Amazon Computers' features are float16 rows of 1,534 bytes: hits, misses and admissions copy bytes whatever
    # the dtype; replay checks every gathered row against the table
    path, values = write_table(tmp_path, rows=200, dim=767, dtype=np.float16)
    trace = random_trace(4, batches=30, rows=200, size=25)
    hits = replay(make_cache(path, policy, 40), values, trace)
    assert sum(hits) > 0
