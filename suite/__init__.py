"""gnnsuite: resource-efficient GNN training across disk, CPU memory and accelerator.

The Python API (the same as the ``gnnsuite`` command; see ``docs/api.md``)::

    import suite

    run = suite.run("experiments/specs/cora.yaml", overrides=["training.epochs=5"], out="out/runs")
    run.metrics["test"]                  # {'accuracy': ...}
    runs = suite.run_grid("experiments/specs/quickstart_grid.yaml", out="out/grid")
    table = suite.load_runs("out/grid")  # one row per run (pandas)
    model = suite.load_model(run.run_dir)
    model.evaluate("test")               # the recorded test metric, recomputed

Every function imports what it needs when called, so ``import suite`` stays light.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from suite.config import RunSpec
    from suite.data import GraphStore
    from suite.model import TrainedModel

from suite.version import __version__



@dataclass(frozen=True)
class Run:
    """One run's folder and summary, as :func:`run` and :func:`run_grid` return them.

    Attributes:
        run_dir: ``OUT/<run_id>`` (``config.yaml``, ``records.jsonl``, ``summary.json``, ``checkpoints/``).
        summary: the content of ``summary.json`` (``status``, ``metrics``, ``loss``, ``epoch_time_s``, ...).
    """

    run_dir: Path
    summary: dict[str, Any] = field(repr=False)

    @property
    def run_id(self) -> str:
        """The run's id (``<label>-s<seed>-<hash of the spec>``)."""
        return self.summary.get("run_id", self.run_dir.name)

    @property
    def status(self) -> str | None:
        """``completed``, ``failed`` or ``diverged``."""
        return self.summary.get("status")

    @property
    def metrics(self) -> dict[str, Any]:
        """``{"main": ..., "valid": {...}, "test": {...}, "valid_curve": [...], ...}``."""
        return self.summary.get("metrics", {})

    def epochs(self) -> "pd.DataFrame":
        """The run's epoch records as a table (:func:`load_epochs`)."""
        return load_epochs(self.run_dir)

    def evals(self) -> "pd.DataFrame":
        """The run's evaluation records as a table (:func:`load_evals`)."""
        return load_evals(self.run_dir)

    def load_model(self, which: str = "last", device: str = "cpu") -> "TrainedModel":
        """The run's trained model (:func:`load_model`)."""
        return load_model(self.run_dir, which, device=device)


def _spec(spec: Any, overrides: list[str] | tuple[str, ...] = ()) -> "RunSpec":
    from suite.config import RunSpec, apply_overrides, load_spec, spec_from_dict

    if isinstance(spec, RunSpec):
        return spec_from_dict(apply_overrides(spec.resolved(), list(overrides))) if overrides else spec
    if isinstance(spec, dict):
        return spec_from_dict(apply_overrides(spec, list(overrides)))
    return load_spec(spec, list(overrides))


def run(spec: Any, overrides: list[str] | tuple[str, ...] = (), out: str | os.PathLike = "out/runs", *,
        overwrite: bool = False, progress: bool = False, log_to: list[str] | tuple[str, ...] = ()) -> Run:
    """Run one spec (a YAML path, a dict or a :class:`~suite.config.RunSpec`) into ``out/<run_id>``.

    A complete run there is not repeated (unless ``overwrite``); a killed one resumes from its last checkpoint.
    ``overrides`` are ``--set`` strings; ``log_to`` names trackers (``tensorboard``, ``mlflow``).

    Example:
        >>> import suite
        >>> r = suite.run({"dataset": {"name": "synthetic", "preset": "tiny"}, "training": {"epochs": 2}},
        ...               out="out/api-example")                                   # doctest: +SKIP
        >>> r.status, r.metrics["test"]                                            # doctest: +SKIP
        ('completed', {'accuracy': 0.55})

    Raises:
        ConfigError / DataError: bad spec or dataset (one line naming the field or file).
    """
    from suite.runner import run_spec

    resolved = _spec(spec, overrides)
    summary = run_spec(resolved, Path(out), overwrite=overwrite, progress=progress, log_to=tuple(log_to))
    return Run(Path(out) / resolved.run_id, summary)


def run_grid(grid: Any, out: str | os.PathLike = "out/runs", overrides: list[str] | tuple[str, ...] = (), *,
             jobs: int | None = 1, executor: str = "local", overwrite: bool = False,
             progress: bool = False) -> list[Run]:
    """Run every point of a grid (a YAML path or a mapping with ``base`` and ``axes``), skipping complete runs.

    Example:
        >>> runs = suite.run_grid("experiments/specs/quickstart_grid.yaml", out="out/grid",
        ...                       overrides=["training.epochs=1"])                 # doctest: +SKIP
        >>> [r.status for r in runs]                                               # doctest: +SKIP
        ['completed', 'completed']
    """
    from suite.grid import expand_grid, run_grid as _run_grid

    specs = expand_grid(grid if isinstance(grid, dict) else Path(grid), list(overrides))
    summaries = _run_grid(specs, Path(out), jobs=jobs, overwrite=overwrite, progress=progress, executor=executor)
    return [Run(Path(out) / spec.run_id, summary) for spec, summary in zip(specs, summaries)]


def load_runs(folder: str | os.PathLike, *, include_incomplete: bool = True) -> "pd.DataFrame":
    """One row per run under ``folder`` (summary and spec flattened: ``metrics.test.accuracy``,
    ``config.training.learning_rate``, ...).

    Example:
        >>> table = suite.load_runs("out/grid")                                    # doctest: +SKIP
        >>> table.groupby("config.system.options.policy")["metrics.test.accuracy"].mean()  # doctest: +SKIP
    """
    from suite.results import load_runs as _load_runs

    return _load_runs(folder, include_incomplete=include_incomplete)


def load_epochs(folder: str | os.PathLike, *, config_fields: tuple[str, ...] = ()) -> "pd.DataFrame":
    """One row per epoch record (``loss``, ``epoch_time_s``, ``stage_busy_s.<stage>``, ...) of every run.

    Example:
        >>> suite.load_epochs("out/grid", config_fields=["training.learning_rate"])  # doctest: +SKIP
    """
    from suite.results import load_epochs as _load_epochs

    return _load_epochs(folder, config_fields=config_fields)


def load_evals(folder: str | os.PathLike, *, config_fields: tuple[str, ...] = ()) -> "pd.DataFrame":
    """One row per evaluation record (``epoch``, ``split``, ``accuracy`` or ``mrr``, ``hits@k``) of every run.

    Example:
        >>> suite.load_evals("out/grid").query("split == 'valid'")                 # doctest: +SKIP
    """
    from suite.results import load_evals as _load_evals

    return _load_evals(folder, config_fields=config_fields)


def load_batches(folder: str | os.PathLike, *, config_fields: tuple[str, ...] = ()) -> "pd.DataFrame":
    """One row per batch record of pipelined runs (per-stage start/end, worker, staleness).

    Example:
        >>> suite.load_batches("out/pipelined")["staleness"].describe()            # doctest: +SKIP
    """
    from suite.results import load_batches as _load_batches

    return _load_batches(folder, config_fields=config_fields)


def open_dataset(dataset: Any, **fields: Any) -> "GraphStore":
    """The graph store of a dataset: a registered name with its ``dataset`` fields (``preset``, ``root``,
    ``cache_dir``, ``params``), a mapping of them, a :class:`~suite.config.DatasetSpec`, or the folder of an
    existing store. Generated or prepared on first use (cached under ``cache_dir``).

    Example:
        >>> store = suite.open_dataset("synthetic", preset="tiny", cache_dir="data")  # doctest: +SKIP
        >>> store.num_nodes, store.feature_dim                                     # doctest: +SKIP
        (300, 16)
    """
    from suite.config import DatasetSpec, spec_from_dict
    from suite.datasets import open_dataset as _open_dataset
    from suite.data import GraphStore

    if isinstance(dataset, DatasetSpec):
        return _open_dataset(dataset)
    if isinstance(dataset, (str, os.PathLike)) and not fields and Path(dataset, "metadata.json").is_file():
        return GraphStore.open(dataset)
    data = dict(dataset) if isinstance(dataset, dict) else {"name": str(dataset)}
    data.update(fields)
    return _open_dataset(spec_from_dict({"dataset": data}, source="open_dataset").dataset)


def load_model(run_dir: str | os.PathLike, which: str = "last", *, device: str = "cpu",
               overrides: list[str] | tuple[str, ...] = ()) -> "TrainedModel":
    """A run's trained model from its checkpoint (``last`` or ``best``), to evaluate, predict and export
    (:class:`suite.model.TrainedModel`).

    Example:
        >>> model = suite.load_model("out/runs/cora-graphsage-s0-0123456789ab")   # doctest: +SKIP
        >>> model.evaluate("test")                                                 # doctest: +SKIP
        {'accuracy': 0.803}
        >>> probabilities = model.predict_nodes([0, 1, 2])                         # doctest: +SKIP
        >>> model.export("encoded-nodes", "out/cora-z.parquet")                    # doctest: +SKIP
    """
    from suite.model import load_model as _load_model

    return _load_model(run_dir, which, device=device, overrides=overrides)


def import_marius(path: str | os.PathLike, out: str | os.PathLike, *, dataset: str | None = None,
                  root: str | None = None, overwrite: bool = False) -> "RunSpec":
    """Translate the Marius config ``path`` into the run spec ``out`` (YAML, validated, written atomically);
    ``gnnsuite import-marius``. The translation itself is :func:`suite.data.marius.translate`.

    Returns:
        The validated :class:`~suite.config.RunSpec`.
    """
    from suite.config import read_yaml, spec_from_dict
    from suite.data.marius import translate
    from suite.errors import ConfigError
    from suite.io import atomic_write_bytes

    path, out = Path(path), Path(out)
    if out.exists() and not overwrite:
        raise ConfigError(f"{out}: exists (use --overwrite)")
    data = translate(read_yaml(path), str(path), dataset, root)
    spec = spec_from_dict(data, source=f"{path} (translated)")
    header = f"# Translated from the Marius config {path} by gnnsuite import-marius (see docs/datasets.md).\n"
    atomic_write_bytes(out, (header + spec.to_yaml()).encode())
    return spec


__all__ = ["Run", "__version__", "import_marius", "load_batches", "load_epochs", "load_evals", "load_model", "load_runs",
           "open_dataset", "run", "run_grid"]
