"""Disk-based training: partition-buffer policies (plans) and, later, the layout, buffer and disk system.

Importing :mod:`systems.disk.policies` registers the built-in policies in :data:`suite.registry.POLICIES`.
"""
