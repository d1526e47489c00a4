"""Translate a Marius (MariusGNN) training config into a run spec: ``gnnsuite import-marius CONFIG.yaml --out SPEC``
(:func:`suite.import_marius` validates and writes the spec).

Marius configs (``model``, ``storage``, ``training``, ``evaluation``; the schema of Marius's
``docs/config_interface/full_schema.rst`` and ``marius_config.py``) are read as they are. Every field is either
mapped, accepted without effect (the reason is in :data:`FIELD_TABLE`), or refused with a one-line
:class:`~suite.errors.ConfigError` naming the field; a field the table does not know is refused too. The
documented table of every field is in ``docs/datasets.md`` (generated from :data:`FIELD_TABLE` by
:func:`field_table_markdown`, and checked against it by the tests).

The dataset: Marius reads a preprocessed folder (``storage.dataset.dataset_dir``); the spec names a registered
dataset instead. By default the folder's name is looked up in :data:`MARIUS_DATASETS` (``fb15k_237`` ->
``fb15k237``...) and the folder itself becomes ``dataset.root``; ``--dataset NAME`` and ``--root DIR`` override
both (e.g. the OpenKE raw files of FB15k-237, or a store from ``gnnsuite datasets import``).
"""

from __future__ import annotations

from suite.data.marius.fields import FIELD_TABLE, MARIUS_DATASETS, field_table_markdown
from suite.data.marius.translate import translate

__all__ = ["FIELD_TABLE", "MARIUS_DATASETS", "field_table_markdown", "translate"]
