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
