"""Training tasks: what happens to a batch in each stage; importing this package registers them in
:data:`suite.registry.TASKS` under the names ``training.task`` takes:

- ``node_classification``: :class:`~systems.tasks.node_classification.NodeClassificationTask`;
- ``link_prediction``: :class:`~systems.tasks.link_prediction.LinkPredictionTask`.

Systems (in-memory, pipelined, disk) decide when and where the stages run; a task decides what they do.
"""

from systems.tasks.task import Task
from systems.tasks.node_classification import NodeClassificationTask, make_optimizer
from systems.tasks.link_prediction import LinkPredictionTask

__all__ = ["LinkPredictionTask", "NodeClassificationTask", "Task", "make_optimizer"]
