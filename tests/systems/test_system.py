"""The System template's model selection (``evaluation.restore_best``) and row-normalised features, end to end on
a planted partition."""

from __future__ import annotations

import pytest
import torch

from suite.errors import ConfigError
from systems.system import BestParameters
from systems.tasks.node_classification import NodeClassificationTask
from tests.support.in_memory import make_spec, run

pytestmark = pytest.mark.usefixtures("one_thread")


def curves(spec, store, out):
    outcome, _ = run(spec, store, out)
    valid = [metrics["accuracy"] for _, metrics in outcome.valid_metrics]
    test = [metrics["accuracy"] for _, metrics in outcome.test_curve]
    return outcome, valid, test


def test_restore_best_tests_the_parameters_of_the_first_best_validation_epoch(easy_store, tmp_path):
    # a learning rate high enough that validation accuracy goes up and down over 12 epochs
    spec = make_spec(training={"epochs": 12, "learning_rate": 0.05},
                     evaluation={"every": 1, "test_every": 1, "restore_best": True})
    outcome, valid, test = curves(spec, easy_store, tmp_path / "best")
    best_epoch = valid.index(max(valid))
    assert best_epoch < len(valid) - 1, "the test needs a run whose last epoch is not its best"
    assert outcome.summary_extra["restored_best"] == {"metric": "accuracy", "epoch": best_epoch,
                                                      "valid": max(valid), "restored": True}
    # evaluation draws from a generator seeded afresh: the parameters of the best epoch give its test accuracy again
    assert outcome.test_metrics["accuracy"] == test[best_epoch]
    assert outcome.test_curve[-1][1] == outcome.test_metrics

    plain, plain_valid, plain_test = curves(make_spec(training={"epochs": 12, "learning_rate": 0.05},
                                                      evaluation={"every": 1, "test_every": 1}),
                                            easy_store, tmp_path / "last")
    assert plain_valid == valid and plain_test[:-1] == test[:-1]  # the same training either way
    assert plain.test_metrics["accuracy"] == plain_test[-1] and "restored_best" not in plain.summary_extra


def test_best_parameters_keep_the_first_of_equals_and_ignore_nan():
    class Holder:
        def __init__(self):
            self.value = 0

        def parameter_state(self):
            return {"value": self.value}

        def load_parameter_state(self, state):
            self.value = state["value"]

    holder, best = Holder(), BestParameters("accuracy")
    for epoch, accuracy in enumerate([0.5, 0.7, 0.7, float("nan"), 0.6]):
        holder.value = epoch
        best.offer(epoch, {"accuracy": accuracy}, holder)
    best.restore(holder)
    assert holder.value == 1 and best.describe() == {"metric": "accuracy", "epoch": 1, "valid": 0.7,
                                                     "restored": True}


def test_row_normalised_features_reach_the_model_as_rows_summing_to_one(easy_store):
    spec = make_spec(dataset={"name": "store", "feature_normalization": "row"})
    task = NodeClassificationTask(spec, easy_store, torch.device("cpu"))
    task.setup()
    batch = task.plan_epoch(0)[0]
    task.sample(batch)
    task.gather(batch)
    raw = easy_store.features.to(torch.float32)[batch.sample.input_nodes]
    assert torch.allclose(batch.x, raw / raw.sum(dim=1, keepdim=True))


def test_restore_best_is_refused_where_the_state_is_not_in_memory():
    from systems.disk.disk_link_prediction import DiskLinkPrediction

    spec = make_spec(system={"name": "disk"}, training={"task": "link_prediction"},
                     evaluation={"restore_best": True})
    with pytest.raises(ConfigError, match="evaluation.restore_best: the disk system cannot restore earlier "
                                          "parameters for link_prediction"):
        DiskLinkPrediction(spec, None, torch.device("cpu"), None)


# ---------------------------------------------------------------------------------------------- within an epoch
def _points_spec(validations: int, epochs: int = 3):
    return make_spec(model={"encoder": "shallow", "num_layers": 0, "fanouts": (), "decoder": "distmult",
                            "embedding_dim": 16, "dropout": 0.0, "learnable_embeddings": True},
                     training={"task": "link_prediction", "epochs": epochs, "batch_size": 32,
                               "learning_rate": 0.1, "optimizer": "adagrad"},
                     evaluation={"every": 1, "validations_per_epoch": validations})


def test_validations_within_an_epoch_leave_the_training_alone_and_count_apart(tiny, tmp_path):
    plain, _ = run(_points_spec(1), tiny, tmp_path / "plain")
    fine, recorder = run(_points_spec(3), tiny, tmp_path / "fine")
    # evaluation draws from generators of its own: the same training, the same end-of-epoch validations and test
    assert fine.valid_metrics == plain.valid_metrics and fine.test_metrics == plain.test_metrics
    assert [s.loss for s in fine.epochs] == [s.loss for s in plain.epochs]
    assert len(fine.valid_points) == 3 * 3 and len(plain.valid_points) == 3
    times = [point["train_s"] for point in fine.valid_points]
    assert times == sorted(times) and len(set(times)) == len(times)
    for epoch in range(3):  # each epoch's last point is its end-of-epoch validation, at the training time so far
        end = fine.valid_points[3 * epoch + 2]
        assert end["train_s"] == pytest.approx(sum(fine.epoch_time_s[:epoch + 1]))
        assert {k: end[k] for k in fine.valid_metrics[epoch][1]} == fine.valid_metrics[epoch][1]
        assert [p["batches"] for p in fine.valid_points[3 * epoch:3 * epoch + 3]] == [
            round(end["of_batches"] / 3), round(2 * end["of_batches"] / 3), end["of_batches"]]
    # the evaluations between batches are timed apart from training and recorded
    from suite.recorder import read_records

    within = [r for r in read_records(recorder.run_dir) if r.get("kind") == "within_epoch_eval"]
    assert len(within) == 2 * 3 and all(r["seconds"] > 0 for r in within)
    assert sum(e["seconds"] for e in fine.eval_time_s if e.get("batches") is not None) == pytest.approx(
        sum(r["seconds"] for r in within))


@pytest.mark.parametrize(("num_batches", "validations", "expected"),
                         [(10, 4, {2, 5, 8}), (10, 1, set()), (3, 3, {1, 2}), (1, 4, set()), (2, 4, {1})])
def test_within_epoch_validation_points_are_evenly_spaced_and_never_empty_or_at_the_end(num_batches, validations,
                                                                                       expected):
    from systems.in_memory import InMemorySystem

    system = InMemorySystem.__new__(InMemorySystem)
    system.spec = _points_spec(validations)
    assert system.within_epoch_validations(num_batches) == expected


def test_validations_within_an_epoch_are_refused_where_the_system_cannot_stop_between_batches():
    from systems.pipelined import PipelinedSystem

    spec = _points_spec(2).model_copy(update={"system": make_spec(system={"name": "pipelined"}).system})
    with pytest.raises(ConfigError, match="evaluation.validations_per_epoch: the PipelinedSystem system validates "
                                          "only between epochs"):
        PipelinedSystem(spec, None, torch.device("cpu"), None)


def test_validations_within_an_epoch_need_every_epoch_validated():
    with pytest.raises(ValueError, match="evaluation.validations_per_epoch: validations within every epoch need"):
        make_spec(evaluation={"every": 2, "validations_per_epoch": 2})
    with pytest.raises(ValueError, match="evaluation.validations_per_epoch"):
        make_spec(evaluation={"every": 1, "splits": ["test"], "validations_per_epoch": 2})
