"""The link-prediction peer comparison (experiments/figures/link_prediction_peers.py) on FB15k-237's dense core of 100
entities (892 training triples; the quick mode's core is 500):
the suite, PyTorch-BigGraph (p = 1; p = 8 in the slow set; in its own environment) and PyKEEN really train, their exported
embeddings are ranked by the suite's evaluation, and the table, figure and REPORT claim read the result.

Where a peer is not installed (``make peers``), its rows are checked to be ``skipped`` with the reason instead.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from experiments.figures import link_prediction_peers as peers
from experiments.peers.lp_configurations import exported
from experiments.report import claims

CONFIGURATIONS = ("suite", "suite-pipelined", "pbg-p1", "pykeen")
SLOW_CONFIGURATIONS = ("pbg-p8",)  # 64 buckets an epoch of 100 entities: a minute, most of it system time (-m slow)
PEERS = ("pbg-p1", "pykeen")
ENTITIES, TRAIN_TRIPLES = 100, 892  # FB15k-237's 100 entities of highest degree, the training triples between them


def missing(name: str) -> str | None:
    context = peers.Context(None, None, (), peers.DEFAULT_PBG_PYTHON, peers.Setting(epochs=1))
    return peers.CONFIGURATIONS.get(name).missing(context)


def _record(root, shared_datasets, configurations):
    status = peers.main(["--quick", "--out", str(root / "runs"), "--results", str(root), "--data-dir",
                         str(root / "data"), "--dataset-root", str(shared_datasets / "fb15k237"),
                         "--configurations", *configurations, "--quick-entities", str(ENTITIES)])
    assert status == 0
    return root


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, shared_datasets):
    return _record(tmp_path_factory.mktemp("lp_peers"), shared_datasets, CONFIGURATIONS)


@pytest.fixture(scope="module")
def recorded_slow(tmp_path_factory, shared_datasets):
    return _record(tmp_path_factory.mktemp("lp_peers_slow"), shared_datasets, SLOW_CONFIGURATIONS)


def test_every_configuration_trained_or_skipped_with_its_reason(recorded):
    _check_trained_or_skipped(recorded, CONFIGURATIONS)


@pytest.mark.slow
def test_pbg_with_eight_partitions_trains_exports_and_is_ranked(recorded_slow):
    _check_trained_or_skipped(recorded_slow, SLOW_CONFIGURATIONS)
    _check_exports_ranked(recorded_slow, SLOW_CONFIGURATIONS)
    for name in SLOW_CONFIGURATIONS:
        _check_scores_above_corruptions(recorded_slow, name)
    _check_validation_curves(recorded_slow, SLOW_CONFIGURATIONS)


def _check_trained_or_skipped(recorded, configurations):
    table = pd.read_csv(recorded / peers.TABLE_CSV)
    assert list(table["configuration"]) == list(configurations)
    for _, row in table.iterrows():
        reason = missing(row["configuration"])
        if reason is None:
            assert row["status"] == "ok", row.to_dict()
            assert row["epoch_time_s"] > 0 and row["triples_per_s"] > 0 and row["epochs"] == peers.QUICK_EPOCHS
            assert 0.0 <= row["test_mrr"] <= 1.0 and 0.0 <= row["test_hits@10"] <= 1.0
        else:
            assert row["status"] == "skipped" and row["reason"] == reason


def test_peers_exports_are_ranked_by_the_suites_evaluation(recorded):
    _check_exports_ranked(recorded, PEERS)


def _check_exports_ranked(recorded, names):
    runs = pd.read_csv(recorded / peers.RUNS_CSV)
    for name in names:
        if missing(name) is not None:
            continue
        run_dir = recorded / "runs" / "runs" / name / "t1" / "s0"
        z, relations = np.load(run_dir / "embeddings.npy"), np.load(run_dir / "relations.npy")
        assert z.shape == (ENTITIES, 100) and np.isfinite(z).all()
        assert relations.shape == ((2 if name.startswith("pbg") else 1) * 237, 100)
        driver = json.loads((run_dir / "result.json").read_text())
        assert len(driver["epoch_time_s"]) == peers.QUICK_EPOCHS and driver["triples"] == TRAIN_TRIPLES
        row = runs[runs["configuration"] == name].iloc[0]
        assert row["test_mrr"] == pytest.approx(exported(_context(recorded), run_dir,
                                                         name.startswith("pbg"))["filtered_mrr"])


def _context(recorded):
    overrides = (f"dataset.root={recorded / 'runs' / 'fb15k237-quick'}", f"dataset.cache_dir={recorded / 'data'}")
    return peers.Context(recorded / "runs", recorded / "runs" / "triples", overrides, peers.DEFAULT_PBG_PYTHON,
                         peers.Setting(epochs=peers.QUICK_EPOCHS))


@pytest.mark.parametrize("name", PEERS)
def test_exported_embeddings_score_training_triples_above_corruptions(recorded, name):
    _check_scores_above_corruptions(recorded, name)


def _check_scores_above_corruptions(recorded, name):
    # the export is in the suite's ids (and PBG's two operators in the suite's order) only if the training
    # triples score higher, through the suite's decoder, than the same triples with a random tail
    if missing(name) is not None:
        pytest.skip(missing(name))
    from systems.models.decoders import DistMult

    run_dir = recorded / "runs" / "runs" / name / "t1" / "s0"
    z = torch.from_numpy(np.load(run_dir / "embeddings.npy"))
    relations = torch.from_numpy(np.load(run_dir / "relations.npy"))
    decoder = DistMult(237, 100, inverse_relations=len(relations) == 474)
    with torch.no_grad():
        decoder.relations.copy_(relations)
        train = torch.from_numpy(np.load(recorded / "runs" / "triples" / "train.npy"))
        heads, rels, tails = train.unbind(1)
        corrupted = torch.randint(len(z), tails.shape, generator=torch.Generator().manual_seed(0))
        true = (decoder.tail_query(z[heads], rels) * z[tails]).sum(1)
        fake = (decoder.tail_query(z[heads], rels) * z[corrupted]).sum(1)
    assert (true > fake).float().mean() > 0.9


def test_table_pairs_seeds_against_pbg_and_the_figure_reads_it(recorded, tmp_path):
    table = pd.read_csv(recorded / peers.TABLE_CSV).set_index("configuration")
    if missing("pbg-p1") is None:
        for name in ("suite", "suite-pipelined"):
            if table.loc[name, "status"] == "ok":
                expected = table.loc[name, "triples_per_s"] / table.loc["pbg-p1", "triples_per_s"]
                assert table.loc[name, "speed_vs_pbg-p1"] == pytest.approx(expected)
        assert table.loc["pbg-p1", "speed_vs_pbg-p1"] == pytest.approx(1.0)
    out = peers.plot_link_prediction_peers(recorded / peers.TABLE_CSV, tmp_path / "peers.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [plot.draw for plot in peers.FIGURE.plots] == [peers.plot_link_prediction_peers, peers.plot_time_to_mrr]


def test_every_table_records_the_commit_its_runs_were_measured_at(recorded):
    from experiments.report import table_commits
    from suite.provenance import git_sha

    commits = table_commits(recorded)
    for name in (peers.RUNS_CSV, peers.TABLE_CSV, peers.TTT_CSV):
        assert commits.get(name) == [git_sha()], name


def test_claim_reads_the_table_and_one_seed_decides_nothing(recorded):
    finding = claims().get("lp-vs-pbg").evaluate(recorded)
    if missing("pbg-p1") is not None:
        assert finding.verdict == "not testable here"
    else:
        assert finding.verdict == "inconclusive" and "vs PBG p=1" in finding.measured


def test_summary_statistics_by_hand():
    rows = [{"configuration": "suite", "system": "suite", "label": "suite", "threads": 1, "seed": s, "epochs": 5,
             "status": "ok", "epoch_time_s": t, "triples_per_s": 100 / t, "test_mrr": m, "test_hits@10": 0.4,
             "under_load": False, "foreign_cores": 0.0} for s, t, m in ((0, 2.0, 0.24), (1, 4.0, 0.26))]
    rows += [{"configuration": "pbg-p1", "system": "pbg", "label": "PBG p=1", "threads": 1, "seed": s, "epochs": 5,
              "status": "ok", "epoch_time_s": 4.0, "triples_per_s": 25.0, "test_mrr": 0.25, "test_hits@10": 0.4,
              "under_load": s == 1, "foreign_cores": 0.3 if s else 0.0} for s in (0, 1)]
    table = peers.summary_table(pd.DataFrame(rows)).set_index("configuration")
    suite = table.loc["suite"]
    assert suite["epoch_time_s"] == 3.0 and suite["epoch_time_s_min"] == 2.0 and suite["epoch_time_s_max"] == 4.0
    assert suite["test_mrr"] == pytest.approx(0.25)
    assert suite["test_mrr_ci95"] == pytest.approx(12.706 * 0.01 / 1.0, rel=1e-3)  # t(0.975, 1) * sd / sqrt(2)
    assert suite["speed_vs_pbg-p1"] == pytest.approx(1.5)  # per-seed ratios 2.0 and 1.0
    assert suite["speed_vs_pbg-p1_min"] == pytest.approx(1.0) and suite["speed_vs_pbg-p1_max"] == pytest.approx(2.0)
    assert table.loc["pbg-p1", "under_load_runs"] == 1
    # the report's interval: seed 1's PBG run was under load, so one quiet pair (ratio 2.0), no interval
    assert suite["speed_vs_pbg-p1_geomean"] == pytest.approx(2.0) and suite["speed_pairs_vs_pbg-p1"] == 1
    assert math.isnan(suite["speed_vs_pbg-p1_geomean_ci_low"])
    assert suite["mrr_minus_pbg-p1"] == pytest.approx(0.0)
    assert peers.warm_epoch_s([9.0, 2.0, 4.0]) == 3.0 and peers.warm_epoch_s([5.0]) == 5.0


def test_the_quick_dataset_is_the_dense_core_renumbered(tmp_path):
    source = tmp_path / "openke"
    source.mkdir()
    (source / "entity2id.txt").write_text("4\n/m/a\t0\n/m/b\t1\n/m/c\t2\n/m/d\t3\n")
    (source / "relation2id.txt").write_text("2\n/r/x\t0\n/r/y\t1\n")
    # training degrees: entity 2 -> 3, entity 1 -> 2, entity 0 -> 2, entity 3 -> 1 (ties by id: 0 before 1)
    (source / "train2id.txt").write_text("4\n2 1 0\n2 0 1\n0 2 1\n1 3 0\n")
    (source / "valid2id.txt").write_text("2\n0 2 0\n3 2 1\n")
    (source / "test2id.txt").write_text("1\n2 0 0\n")
    core = peers.write_quick_dataset(source, tmp_path / "core", entities=2)  # entities 2 and 0 -> new ids 0 and 1
    assert (core / "entity2id.txt").read_text() == "2\n/m/c\t0\n/m/a\t1\n"
    assert (core / "train2id.txt").read_text() == "2\n0 1 1\n1 0 1\n"
    assert (core / "valid2id.txt").read_text() == "1\n1 0 0\n"
    assert (core / "test2id.txt").read_text() == "1\n0 1 0\n"
    assert (core / "relation2id.txt").read_text() == (source / "relation2id.txt").read_text()


# ---------------------------------------------------------------------------------------------- time to MRR
def test_runs_record_the_validation_curve_on_the_same_sample(recorded):
    _check_validation_curves(recorded, PEERS)


def test_the_suite_computes_on_as_many_threads_as_its_peers(recorded):
    # the suite's thread budget plans with the cores it may use: a 1-thread row must not give torch more threads
    runs = pd.read_csv(recorded / peers.RUNS_CSV)
    suite_runs = runs[(runs["system"] == "suite") & (runs["status"] == "ok")]
    assert len(suite_runs) == 2  # suite, suite-pipelined
    for _, row in suite_runs.iterrows():
        assert json.loads(row["compute_threads"]) == [row["threads"]] * peers.QUICK_EPOCHS, row.to_dict()


def _check_validation_curves(recorded, peer_names):
    runs = pd.read_csv(recorded / peers.RUNS_CSV)
    for _, row in runs[runs["status"] == "ok"].iterrows():
        curve, times = json.loads(row["valid_mrr"]), json.loads(row["curve_train_s"])
        per_epoch = row["valid_points_per_epoch"]
        assert row["validations_per_epoch"] == peers.VALIDATIONS_PER_EPOCH
        # PBG p=1 validates after each of its edge chunks (p=8 between epochs: chunks would multiply its swaps); the
        # quick core is one batch an epoch for the suite, and the pipelined configurations and PyKEEN validate
        # between epochs only
        assert per_epoch == (peers.VALIDATIONS_PER_EPOCH if row["configuration"] == "pbg-p1" else 1)
        assert len(curve) == len(times) == peers.QUICK_EPOCHS * per_epoch and all(0.0 <= m <= 1.0 for m in curve)
        assert times == sorted(times) and times[-1] == pytest.approx(row["train_time_s"], abs=1e-3)
        # the curve's passes add up to the epochs (PBG: its edge chunks' passes, each timed alone)
        assert sum(json.loads(row["epoch_times_s"])) == pytest.approx(row["train_time_s"], abs=1e-3)
        assert row["target"] == peers.QUICK_TARGET and row["valid_eval_s"] > 0
        if row["reached_target"]:  # the first point at the target, and the training time up to it
            first = next(k for k, m in enumerate(curve) if m >= row["target"])
            assert row["epochs_to_target"] == (first + 1) / per_epoch
            assert row["time_to_target_s"] == pytest.approx(times[first], abs=1e-3)
        else:
            assert math.isnan(row["time_to_target_s"])
    for name in peer_names:  # the last point is the exported embeddings' validation MRR
        if missing(name) is None:
            row = runs[runs["configuration"] == name].iloc[0]
            run_dir = recorded / "runs" / "runs" / name / "t1" / "s0"
            last = exported(_context(recorded), run_dir, name.startswith("pbg"), "valid")["filtered_mrr"]
            assert json.loads(row["valid_mrr"])[-1] == pytest.approx(last, abs=1e-6)


def test_time_to_target_table_and_the_curves_figure(recorded, tmp_path):
    table = pd.read_csv(recorded / peers.TTT_CSV)
    ok = pd.read_csv(recorded / peers.TABLE_CSV).query("status == 'ok'")
    assert sorted(table["configuration"]) == sorted(ok["configuration"])
    suite = table.set_index("configuration").loc["suite"]
    if (table["system"] != "suite").any():  # one seed: never conclusive
        assert suite["verdict"] == "inconclusive" and suite["best_peer"] in set(table["configuration"])
    out = peers.plot_time_to_mrr(recorded / peers.RUNS_CSV, tmp_path / "curves.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert claims().get("lp-time-to-mrr").evaluate(recorded).verdict in ("inconclusive", "not testable here")


def test_time_to_mrr_by_hand():
    reach = peers.time_to_mrr([2.0, 3.0, 4.0], [0.10, 0.25, 0.30], 0.24)
    assert reach["reached_target"] and reach["epochs_to_target"] == 2 and reach["time_to_target_s"] == 5.0
    assert reach["train_time_s"] == 9.0 and json.loads(reach["curve_train_s"]) == [2.0, 5.0, 9.0]
    assert reach["time_to_target_interpolated_s"] == pytest.approx(2.0 + 3.0 * 0.14 / 0.15)  # 0.10 -> 0.25 in 3 s
    assert peers.time_to_mrr([2.0, 3.0, 4.0], [0.24, 0.1, 0.3], 0.24)["time_to_target_s"] == 2.0  # at, not above
    never = peers.time_to_mrr([2.0, 3.0], [0.10, 0.20], 0.24)
    assert not never["reached_target"] and math.isnan(never["time_to_target_s"]) and never["train_time_s"] == 5.0
    assert math.isnan(never["time_to_target_interpolated_s"])
    assert peers.time_to_mrr([2.0, 3.0], [0.3, 0.4], 0.24)["time_to_target_interpolated_s"] == 2.0  # at the first
    quarters = peers.time_to_mrr([1.0] * 8, [0.1, 0.15, 0.2, 0.22, 0.23, 0.25, 0.26, 0.27], 0.24, points_per_epoch=4)
    assert quarters["epochs_to_target"] == 1.5 and quarters["time_to_target_s"] == 6.0  # the sixth quarter epoch


def test_ratio_bounds_of_censored_seeds():
    nan = math.nan
    assert peers.ratio_bounds(2.0, 9.0, 4.0, 9.0) == (0.5, 0.5)
    assert peers.ratio_bounds(2.0, 9.0, nan, 10.0) == (0.0, 0.2)  # the peer would need more than its 10 s
    assert peers.ratio_bounds(nan, 9.0, 3.0, 10.0) == (3.0, math.inf)  # the suite more than its 9 s
    assert peers.ratio_bounds(nan, 9.0, nan, 10.0) == (0.0, math.inf)


@pytest.mark.parametrize("pairs, verdict, censored", [
    ([(5.0, 20, 10.0, 20), (5.2, 20, 10.0, 20), (4.9, 20, 10.0, 20)], "holds", 0),  # x0.5, tight
    ([(10.0, 20, 10.0, 20), (10.5, 20, 10.0, 20), (9.8, 20, 10.0, 20)], "does not hold", 0),  # x1.0
    ([(3.0, 20, 10.0, 20), (9.0, 20, 10.0, 20), (6.0, 20, 10.0, 20)], "inconclusive", 0),  # wide
    ([(5.0, 20, 10.0, 20), (5.0, 20, 10.0, 20)], "inconclusive", 0),  # two seeds
    ([(2.0, 20, math.nan, 20), (2.0, 20, math.nan, 20), (2.0, 20, math.nan, 20)], "holds", 3),  # peer never: < 0.1
    ([(math.nan, 20, 5.0, 20), (math.nan, 20, 5.0, 20), (4.0, 20, 5.0, 20)], "does not hold", 2),  # >= 4, 4, 0.8
    ([(5.0, 20, math.nan, 20), (5.0, 20, 10.0, 20), (5.0, 20, 10.0, 20)], "holds", 1),  # 0.25, 0.5, 0.5
    ([(15.0, 20, math.nan, 20), (5.0, 20, 10.0, 20), (5.0, 20, 10.0, 20)], "inconclusive", 1),  # < 0.75: unknown
    ([(math.nan, 20, math.nan, 20), (5.0, 20, 10.0, 20), (5.0, 20, 10.0, 20)], "inconclusive", 1),  # neither
])
def test_time_to_target_verdict(pairs, verdict, censored):
    found, interval, count = peers.time_to_target_verdict(pairs)
    assert (found, count) == (verdict, censored)
    both = [p for p in pairs if math.isfinite(p[0]) and math.isfinite(p[2])]
    assert interval.n == len(both)
    if both:
        assert interval.estimate == pytest.approx(math.exp(np.mean([math.log(p[0] / p[2]) for p in both])))


def test_time_to_target_table_pairs_the_suite_with_the_fastest_peer_by_hand():
    def row(name, system, seed, time_s, train_s=20.0):
        return {"configuration": name, "system": system, "label": name, "threads": 2, "seed": seed, "epochs": 10,
                "status": "ok", "target": 0.24, "reached_target": not math.isnan(time_s), "time_to_target_s": time_s,
                "train_time_s": train_s, "under_load": seed == 0}
    runs = [row("suite", "suite", s, t) for s, t in ((0, 4.0), (1, 5.0), (2, 6.0))]
    runs += [row("pbg-p1", "pbg", s, t) for s, t in ((0, 8.0), (1, 10.0), (2, 12.0))]  # median 10
    runs += [row("pbg-p8", "pbg", s, t) for s, t in ((0, 9.0), (1, math.nan), (2, math.nan))]  # median inf
    runs += [row("pykeen", "pykeen", s, t) for s, t in ((0, 30.0), (1, 30.0), (2, 30.0))]
    table = peers.time_to_target_table(pd.DataFrame(runs)).set_index("configuration")
    suite = table.loc["suite"]
    assert suite["best_peer"] == "pbg-p1" and suite["ratio_vs_best_peer"] == pytest.approx(0.5)
    assert suite["ratio_vs_best_peer_ci_low"] == pytest.approx(0.5) and suite["verdict"] == "holds"
    assert suite["censored_seeds"] == 0 and suite["time_to_target_s"] == 5.0 and suite["under_load_runs"] == 1
    p8 = table.loc["pbg-p8"]
    assert p8["reached"] == 1 and math.isnan(p8["time_to_target_s"]) and p8["time_to_target_s_min"] == 9.0
    assert pd.isna(table.loc["pbg-p1"].get("verdict"))


def test_the_time_to_mrr_claim_needs_some_suite_configuration_at_every_thread_count(tmp_path):
    """lp-time-to-mrr, as lp-vs-pbg: per thread count it holds when one of the suite's configurations (float32 or
    bfloat16 gradient products) holds against the best peer; every thread count must."""
    def row(name, system, threads, seed, time_s):
        return {"configuration": name, "system": system, "label": name, "threads": threads, "seed": seed,
                "epochs": 10, "status": "ok", "target": 0.24, "reached_target": True, "time_to_target_s": time_s,
                "train_time_s": 40.0, "under_load": False}

    def verdict(suite_times: dict[int, float], bf16_times: dict[int, float]) -> str:
        runs = [row("pbg-p1", "pbg", t, s, 10.0 + s) for t in (1, 2) for s in range(3)]
        runs += [row("suite", "suite", t, s, suite_times[t] * (10.0 + s)) for t in (1, 2) for s in range(3)]
        runs += [row("suite-bf16", "suite", t, s, bf16_times[t] * (10.0 + s)) for t in (1, 2) for s in range(3)]
        peers.time_to_target_table(pd.DataFrame(runs)).to_csv(tmp_path / peers.TTT_CSV, index=False)
        return claims().get("lp-time-to-mrr").evaluate(tmp_path).verdict

    assert verdict({1: 0.8, 2: 0.8}, {1: 0.5, 2: 0.6}) == "holds"  # bfloat16 reaches it at both thread counts
    assert verdict({1: 0.5, 2: 0.8}, {1: 0.8, 2: 0.5}) == "holds"  # a different configuration per thread count
    assert verdict({1: 0.5, 2: 0.8}, {1: 0.5, 2: 0.9}) == "does not hold"  # none at 2 threads
    assert verdict({1: 0.5, 2: 0.8}, {1: 0.5, 2: 0.8}) == "does not hold"


def test_the_hogwild_configuration_trains_at_two_threads(recorded, tmp_path, shared_datasets):
    """suite-hogwild (the pipelined system, one compute worker per thread, one intra-op thread each) learns like the
    in-memory suite (Hogwild: not bitwise its result)."""
    status = peers.main(["--quick", "--out", str(tmp_path / "runs"), "--results", str(tmp_path), "--data-dir",
                         str(tmp_path / "data"), "--dataset-root", str(shared_datasets / "fb15k237"),
                         "--configurations", "suite-hogwild", "--threads", "2", "--quick-entities", str(ENTITIES),
                         "--no-plot"])
    assert status == 0
    hogwild = pd.read_csv(tmp_path / peers.RUNS_CSV).iloc[0]
    suite = pd.read_csv(recorded / peers.RUNS_CSV).set_index("configuration").loc["suite"]
    assert hogwild["status"] == "ok" and json.loads(hogwild["compute_threads"]) == [1] * peers.QUICK_EPOCHS
    assert hogwild["test_mrr"] > 0.5 * suite["test_mrr"] > 0.05


def test_a_configuration_runs_from_its_fewest_threads_on(monkeypatch):
    """suite-hogwild is not run at 1 thread (its loader and update threads would compute on the other core)."""
    calls = []
    monkeypatch.setattr(peers, "run_one", lambda context, configuration, threads, seed, overwrite:
                        calls.append((configuration.name, threads)))
    peers.run_all(None, ["suite", "suite-hogwild"], [1, 2], [0])
    assert sorted(calls) == [("suite", 1), ("suite", 2), ("suite-hogwild", 2)]


def test_run_all_runs_a_system_only_on_its_own_seeds(monkeypatch):
    """Full mode runs PyKEEN (minutes an epoch) on fewer seeds than the others: every other configuration runs every
    seed and thread count, PyKEEN only its seeds."""
    calls = []
    monkeypatch.setattr(peers, "run_one", lambda context, configuration, threads, seed, overwrite:
                        calls.append((configuration.system, threads, seed)))
    peers.run_all(None, ["suite", "pykeen"], [1, 2], [0, 1, 2], system_seeds={"pykeen": peers.FULL_PYKEEN_SEEDS})
    assert sorted(call for call in calls if call[0] == "pykeen") == [("pykeen", t, s) for t in (1, 2)
                                                                     for s in peers.FULL_PYKEEN_SEEDS]
    assert sorted(call for call in calls if call[0] == "suite") == [("suite", t, s) for t in (1, 2)
                                                                    for s in (0, 1, 2)]


@pytest.mark.parametrize("allocator", [True, False])
def test_a_measured_run_gets_its_threads_and_the_allocator_settings_only_when_asked(tmp_path, allocator):
    # PBG runs without glibc's allocator settings (they made its two-worker Hogwild runs diverge), the others with
    import sys

    from experiments.peers.lp_configurations import ALLOCATOR_ENV, run_measured

    show = "import os; print(os.environ.get('OMP_NUM_THREADS'), os.environ.get('MALLOC_MMAP_MAX_', 'unset'))"
    wall, foreign = run_measured([sys.executable, "-c", show], 1, tmp_path / "log.txt", allocator=allocator)
    threads, mmap_max = (tmp_path / "log.txt").read_text().split()
    assert threads == "1" and wall > 0 and foreign >= 0
    assert mmap_max == (ALLOCATOR_ENV["MALLOC_MMAP_MAX_"] if allocator else "unset")
