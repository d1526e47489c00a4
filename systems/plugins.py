"""The systems layer's built-in plugins: one table per kind, each line ``"name": "package.module:attribute"``.

This module is data only: importing it imports no system code. The harness reads :data:`TABLES` through the
``gnnsuite.plugins`` entry point in ``pyproject.toml`` (:mod:`suite.plugin_tables`); each registry declares its table's
lines on its first lookup and imports a plugin's module when that name is first used. A plugin is declared here
once, by its line; another package adds its own through an entry point naming a mapping of the same shape.
"""

from __future__ import annotations

# Training systems, constructed by the runner (suite.registry.SYSTEMS).
SYSTEMS = {
    "in_memory": "systems.in_memory:InMemorySystem",
    "pipelined": "systems.pipelined:PipelinedSystem",
    "pyg": "systems.pyg_baseline:PygSystem",
    "disk": "systems.disk.disk_system:disk_system",
    "feature_cache": "systems.feature_cache.feature_cache_system:FeatureCacheSystem",
}

# Peak-memory estimates ``estimate(spec, store, runtime_bytes) -> suite.memory.MemoryEstimate``, one per system
# above, read by the harness before a run trains (suite.memory.MEMORY_ESTIMATES; ``gnnsuite run --dry-run``).
MEMORY_ESTIMATES = {
    "in_memory": "systems.memory:in_memory_estimate",
    "pipelined": "systems.memory:pipelined_estimate",
    "pyg": "systems.memory:pyg_estimate",
    "disk": "systems.memory:disk_estimate",
    "feature_cache": "systems.memory:feature_cache_estimate",
}

# Wrappers ``variant(system_class) -> system_class`` the runner applies by name (suite.registry.SYSTEM_VARIANTS).
SYSTEM_VARIANTS = {
    "data_parallel": "systems.distributed:data_parallel",
}

# Neighbourhood samplers (suite.registry.SAMPLERS).
SAMPLERS = {
    "naive": "systems.sampling.naive:NaiveSampler",
    "dense": "systems.sampling.dense:DenseSampler",
    "pyg": "systems.sampling.pyg:PygSampler",
}

# Encoder builders ``build(spec, in_dim, out_dim) -> nn.Module`` (suite.registry.MODELS).
MODELS = {
    "graphsage": "systems.models.graphsage:build_graphsage",
    "gcn": "systems.models.gcn:build_gcn",
    "gat": "systems.models.gat:build_gat",
    "rgcn": "systems.models.rgcn:build_rgcn",
    "rgcn_fast": "systems.models.rgcn:build_fast_rgcn",
    "mlp": "systems.models.mlp:build_mlp",
    "shallow": "systems.models.shallow:build_shallow",
}

# Link-prediction edge decoders (suite.registry.DECODERS).
DECODERS = {
    "distmult": "systems.models.decoders:DistMult",
    "complex": "systems.models.decoders:ComplEx",
    "dot": "systems.models.decoders:Dot",
    "transe": "systems.models.decoders:TransE",
    "transe_l1": "systems.models.decoders:TransE",
    "transe_l2": "systems.models.decoders:TransEL2",
}

# Training tasks by ``training.task`` (suite.registry.TASKS).
TASKS = {
    "node_classification": "systems.tasks.node_classification:NodeClassificationTask",
    "link_prediction": "systems.tasks.link_prediction:LinkPredictionTask",
}

# The disk system's variant by ``training.task`` (systems.disk.disk_system.DISK_TASKS).
DISK_TASKS = {
    "node_classification": "systems.disk.disk_node_classification:DiskNodeClassification",
    "link_prediction": "systems.disk.disk_link_prediction:DiskLinkPrediction",
}

# Partition-buffer policies, frozen PartitionPolicy subclasses (systems.disk.policies.POLICIES).
POLICIES = {
    "beta": "systems.disk.policies.beta:BetaPolicy",
    "comet": "systems.disk.policies.beta:CometPolicy",
    "random": "systems.disk.policies.baselines:RandomPolicy",
    "in_memory": "systems.disk.policies.baselines:InMemoryPolicy",
    "sequential": "systems.disk.policies.node_policies:SequentialPolicy",
    "sequential_rotation": "systems.disk.policies.node_policies:RotatingSequentialPolicy",
    "sequential_neighborhood": "systems.disk.policies.node_policies:NeighborhoodSequentialPolicy",
    "dispersed": "systems.disk.policies.node_policies:DispersedPolicy",
}

# Feature-cache policies, CachePolicy subclasses: which feature rows stay in memory between batches
# (systems.feature_cache.policies.CACHE_POLICIES).
CACHE_POLICIES = {
    "none": "systems.feature_cache.policies:NoCache",
    "static_degree": "systems.feature_cache.policies:StaticDegree",
    "lru": "systems.feature_cache.policies:Lru",
    "s3fifo": "systems.feature_cache.policies:S3Fifo",
    "belady": "systems.feature_cache.policies:Belady",
}

# The tables by kind, as the ``gnnsuite.plugins`` entry point gives them to the harness (suite.plugin_tables).
TABLES = {
    "systems": SYSTEMS,
    "memory_estimates": MEMORY_ESTIMATES,
    "system_variants": SYSTEM_VARIANTS,
    "samplers": SAMPLERS,
    "models": MODELS,
    "decoders": DECODERS,
    "tasks": TASKS,
    "disk_tasks": DISK_TASKS,
    "policies": POLICIES,
    "cache_policies": CACHE_POLICIES,
}
