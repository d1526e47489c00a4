"""The link-prediction recipe table (experiments/measure/lp_recipes.py): runs grouped by recipe (the seed apart),
validation means, the test interval and the goal's verdict, the choice on validation and the curves, checked by
hand on made-up summaries; both grid files expand."""

from __future__ import annotations

import pytest

from experiments.measure.lp_recipes import DEFAULT_GRID, curve_rows, read_run, recipe, table_rows
from suite.config import RunSpec
from suite.grid import expand_grid
from experiments.common import REPO_ROOT


def spec(decoder: str = "distmult", dim: int = 100, regularization: float = 0.0, dropout: float = 0.0,
         seed: int = 0, relation_dropout: float = 0.0, init: float = 0.001) -> RunSpec:
    return RunSpec.model_validate({
        "dataset": {"name": "fb15k237"}, "seed": seed,
        "model": {"encoder": "shallow", "num_layers": 0, "fanouts": [], "decoder": decoder, "embedding_dim": dim,
                  "learnable_embeddings": True, "embedding_dropout": dropout,
                  "relation_dropout": relation_dropout, "embedding_init_scale": init},
        "training": {"task": "link_prediction", "optimizer": "adagrad", "learning_rate": 0.1, "epochs": 3,
                     "regularization": regularization, "regularizer": "n3"}})


def summary(valid: list[float], test: float | None = None, minutes: float = 10.0, status: str = "completed") -> dict:
    metrics = {"valid_curve": [{"epoch": 2 * index + 1, "filtered_mrr": mrr} for index, mrr in enumerate(valid)]}
    if test is not None:
        metrics["test"] = {"filtered_mrr": test, "filtered_hits@10": 0.5}
    return {"status": status, "train_time_s": minutes * 60, "epoch_time_s": [minutes * 60 / 4] * 4,
            "metrics": metrics}


def test_the_recipe_is_everything_but_the_seed():
    assert recipe(spec(seed=0)) == recipe(spec(seed=1))
    assert recipe(spec(regularization=0.05))["regularizer"] == "n3" and recipe(spec())["regularizer"] == "none"
    assert recipe(spec(dropout=0.3)) != recipe(spec())
    assert recipe(spec(relation_dropout=0.3)) != recipe(spec()) and recipe(spec(init=0.5)) != recipe(spec())


def test_rows_group_seeds_decide_the_goal_and_choose_on_validation_at_equal_epochs():
    n3 = spec(regularization=0.05)
    runs = [(n3, summary([0.34, 0.30], test=0.340)), (spec(regularization=0.05, seed=1), summary([0.31, 0.33], 0.344)),
            (spec(regularization=0.05, seed=2), summary([0.30, 0.30], test=0.5, status="failed")),
            (spec(), summary([0.35, 0.25], test=0.25)), (spec(seed=1), summary([0.35, 0.25], test=0.26)),
            (spec("complex", 200), summary([0.2], test=0.30, minutes=90)),
            (spec("complex", 200, seed=1), summary([0.2], test=0.30, minutes=90))]
    rows = table_rows(runs)
    assert [(row["decoder"], row["regularizer"]) for row in rows] == [("complex", "none"), ("distmult", "n3"),
                                                                      ("distmult", "none")]
    regularized, plain = rows[1], rows[2]
    # compared after epoch 4 (index 3, both curves' last): 0.315 against 0.25, although the plain one's best
    # (0.35, after epoch 2) is the higher; the failed seed is left out
    assert regularized["chosen"] and not plain["chosen"] and rows[0]["chosen"]
    assert regularized["valid_epoch"] == plain["valid_epoch"] == 4 and plain["best_valid"] == pytest.approx(0.35)
    assert regularized["seeds"] == 2 and regularized["best_valid"] == pytest.approx(0.335)
    assert regularized["valid_at"] == regularized["last_valid"] == pytest.approx(0.315)
    assert regularized["test"] == pytest.approx(0.342)
    # t interval of two values: mean +- t(0.975, 1) * sd / sqrt(2), sd of 0.340 and 0.344 = 0.002 * sqrt(2)
    assert regularized["low"] == pytest.approx(0.342 - 12.7062 * 0.002, abs=1e-4)
    assert regularized["verdict"] == "undecided" and plain["verdict"] == "missed"
    assert rows[0]["verdict"] == ""  # 90 minutes of training: over the budget, no verdict


def test_a_point_stopped_early_counts_with_its_epochs_and_sets_the_common_epoch(tmp_path):
    from suite.recorder import Recorder

    stopped = spec(dim=256)
    recorder = Recorder(tmp_path, stopped)
    for epoch, mrr in ((0, 0.2), (1, 0.3)):
        recorder.record("epoch", epoch=epoch, epoch_time_s=30.0)
        recorder.record("eval", epoch=epoch, split="valid", filtered_mrr=mrr)
    recorder.record("epoch", epoch=2, epoch_time_s=30.0)  # stopped before its evaluation
    recorder.close()
    summary_of_stopped = read_run(tmp_path / stopped.run_id)
    assert summary_of_stopped["status"] == "stopped" and summary_of_stopped["train_time_s"] == 90.0
    assert read_run(tmp_path / "never-started") is None
    rows = table_rows([(stopped, summary_of_stopped), (spec(), summary([0.25, 0.35]))])
    assert [(row["dim"], row["epochs"], row["valid_epoch"]) for row in rows] == [(256, 3, 2), (100, 4, 2)]
    assert rows[0]["chosen"] and rows[0]["valid_at"] == pytest.approx(0.3) and rows[1]["valid_at"] == 0.25


def test_a_recipe_whose_interval_clears_the_goal_holds_and_one_seed_decides_nothing():
    runs = [(spec(seed=seed), summary([0.34], test=value)) for seed, value in enumerate((0.340, 0.341, 0.342))]
    assert table_rows(runs)[0]["verdict"] == "holds"
    assert table_rows(runs[:1])[0]["verdict"] == "" and table_rows(runs[:1])[0]["low"] is not None


def test_curves_are_the_seed_means_against_cumulative_training_time():
    runs = [(spec(), summary([0.2, 0.3], minutes=4)), (spec(seed=1), summary([0.4, 0.5], minutes=8))]
    rows = curve_rows(runs)
    assert [(row["epoch"], row["seeds"]) for row in rows] == [(2, 2), (4, 2)]
    # epoch index 1 ends after 2 of 4 epochs: 2 and 4 minutes; index 3 after all: 4 and 8
    assert rows[0]["train_min"] == pytest.approx(3.0) and rows[0]["valid_mrr"] == pytest.approx(0.3)
    assert rows[1]["train_min"] == pytest.approx(6.0) and rows[1]["valid_mrr"] == pytest.approx(0.4)


def test_the_grids_expand():
    recipes = expand_grid(DEFAULT_GRID)
    assert {spec.seed for spec in recipes} == {0, 1, 2} and all("test" in spec.evaluation.splits for spec in recipes)
    assert {spec.model.decoder for spec in recipes} == {"distmult", "complex"}
    sweep = expand_grid(REPO_ROOT / "experiments/specs/fb15k237_recipes_sweep.yaml")
    assert len({spec.run_id for spec in sweep}) == len(sweep) >= 5
    assert all(spec.evaluation.splits == ("valid",) and spec.seed == 0 for spec in sweep)


def test_the_long_grid_is_the_chosen_distmult_recipe_trained_longer():
    """fb15k237_recipes_long.yaml differs from the chosen DistMult recipe in its epochs (and name) only."""
    chosen = next(spec for spec in expand_grid(DEFAULT_GRID) if spec.model.decoder == "distmult" and spec.seed == 0)
    long = next(spec for spec in expand_grid(REPO_ROOT / "experiments/specs/fb15k237_recipes_long.yaml")
                if spec.seed == 0)
    assert long.training.epochs > chosen.training.epochs
    assert {**recipe(long), "epochs": None} == {**recipe(chosen), "epochs": None}
    assert long.model == chosen.model and long.evaluation == chosen.evaluation
    assert long.training.model_copy(update={"epochs": chosen.training.epochs}) == chosen.training


def test_the_libkge_grid_carries_libkge_s_distmult_in_the_suite_s_terms():
    """fb15k237_recipes_libkge.yaml: LibKGE's best FB15k-237 DistMult (large initialization, entity and relation
    dropout, no penalty, ~400 negatives, Adagrad 0.16), 3 seeds, tested on the whole test split."""
    runs = expand_grid(REPO_ROOT / "experiments/specs/fb15k237_recipes_libkge.yaml")
    assert {spec.seed for spec in runs} == {0, 1, 2} and len({spec.run_id for spec in runs}) == 3
    fields = recipe(runs[0])
    assert fields["regularizer"] == "none" and fields["dropout"] > 0.4 and fields["relation_dropout"] > 0.4
    assert fields["init"] == pytest.approx(0.54) and fields["lr"] == pytest.approx(0.16) and fields["dim"] == 256
    assert runs[0].model.inverse_relations and runs[0].evaluation.splits == ("valid", "test")


def test_the_libkge_complex_grid_carries_libkge_s_complex_in_the_suite_s_terms():
    """fb15k237_recipes_libkge_complex.yaml: LibKGE's best FB15k-237 ComplEx (initialization std 0.48, entity /
    relation dropout 0.5 / 0.23, no penalty, Adagrad 0.18) with 500 negatives, 3 seeds, tested on the whole test
    split; it differs from the DistMult grid in the decoder and those fields only."""
    runs = expand_grid(REPO_ROOT / "experiments/specs/fb15k237_recipes_libkge_complex.yaml")
    distmult = expand_grid(REPO_ROOT / "experiments/specs/fb15k237_recipes_libkge.yaml")[0]
    assert {spec.seed for spec in runs} == {0, 1, 2} and len({spec.run_id for spec in runs}) == 3
    fields = recipe(runs[0])
    assert runs[0].model.decoder == "complex" and fields["regularizer"] == "none" and fields["dim"] == 256
    assert fields["dropout"] == pytest.approx(0.5) and fields["relation_dropout"] == pytest.approx(0.23)
    assert fields["init"] == pytest.approx(0.48) and fields["lr"] == pytest.approx(0.18)
    assert runs[0].training.negatives.negatives_per_positive == 500
    assert runs[0].evaluation == distmult.evaluation and runs[0].model.inverse_relations
    assert runs[0].training.model_copy(update={"learning_rate": 0.16, "epochs": distmult.training.epochs,
                                               "negatives": distmult.training.negatives}) == distmult.training
