"""Disk-based training: the plan type (:mod:`systems.disk.plan`), partition-buffer policies
(:mod:`systems.disk.policies`), the partition buffer and the in-buffer graph, and the
disk system with its task variants (node classification, link prediction).

Importing :mod:`systems.disk.policies` registers the built-in policies in :data:`suite.registry.POLICIES`; the
variants register in :data:`systems.disk.disk_system.DISK_TASKS` when :mod:`suite.plugins` loads them.
"""
