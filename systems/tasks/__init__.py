"""Training tasks: what happens to a batch in each stage; declared in the ``tasks`` table of :mod:`systems.plugins`
(looked up in :data:`suite.registry.TASKS`) under the names ``training.task`` takes:

- ``node_classification``: :class:`~systems.tasks.node_classification.NodeClassificationTask`;
- ``link_prediction``: :class:`~systems.tasks.link_prediction.LinkPredictionTask`.

Systems (in-memory, pipelined, disk) decide when and where the stages run; a task decides what they do. What a
system may call is listed in :mod:`systems.tasks.task` (a system that holds the data elsewhere binds a
:class:`NodeView` or :class:`EdgeView` per buffer state).

The package imports none of its modules: import what you need from the module that defines it, so that a
run imports only the plugins its spec names.
"""
