"""Disk-based training: the plan type (:mod:`systems.disk.plan`), partition-buffer policies
(:mod:`systems.disk.policies`), the partition buffer and the in-buffer graph, and the
disk system with its task variants (node classification, link prediction).

The policies (:data:`systems.disk.policies.POLICIES`) and the task variants
(:data:`systems.disk.disk_system.DISK_TASKS`) are declared by their lines in :mod:`systems.plugins`.
"""
