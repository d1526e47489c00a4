"""What was trained, loaded back: re-evaluate, predict and export from a run folder's checkpoint.

:func:`load_model` reads ``RUN_DIR/config.yaml`` and a checkpoint (``checkpoints/last.pt`` or ``best.pt``,
:mod:`suite.checkpoint`) and returns a :class:`TrainedModel`:

- :meth:`TrainedModel.evaluate` rebuilds the run's *system* (its sampling, its buffer for the disk system), restores
  the checkpoint, puts the system where the run had it before that evaluation (the disk system's buffer layout)
  and evaluates with the thread count the run evaluated with: with the ``last`` checkpoint and the spec's
  evaluation settings it reproduces the recorded metric exactly (``gnnsuite eval``);
- :meth:`TrainedModel.predict_nodes` (class probabilities), :meth:`TrainedModel.score_triples` (scores and
  filtered ranks) and :meth:`TrainedModel.export` (learnable embeddings, encoder outputs of every node, predicted
  classes, relation parameters) use the registered *task* in memory over the run's dataset, its state restored from
  the checkpoint; outputs are computed in batches of ``evaluation.batch_size`` and streamed to the file
  (``.npy``, ``.parquet``, ``.csv``) through a temporary name renamed at the end (no half-written output).

Everything is reached through the registries (``TASKS``, ``SYSTEMS``), so the harness imports no system.
The disk system's link prediction keeps its state in its committed embedding generation (``disk-embeddings/``)
rather than in checkpoint files: its ``last`` state is read from there (the whole table, in the original node
order). Runs without checkpoints (``training.checkpoint_every: 0``, the ``pyg`` peer, data-parallel runs) cannot
be loaded: one-line :class:`~suite.errors.DataError`.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from suite.config import RunSpec, apply_overrides, read_yaml, spec_from_dict
from suite.errors import ConfigError, DataError
from suite.io import check_write, close_file, open_write, rename, sync_file, write_to
from suite.recorder import CONFIG_FILE, read_records, read_summary

EXPORTS = ("embeddings", "encoded-nodes", "predictions", "relations")
FORMATS = ("npy", "parquet", "csv")


class _DiscardRecorder:
    """The recorder of a re-evaluation: the run folder is only read."""

    def __init__(self, run_dir: Path, spec: RunSpec):
        self.run_dir, self.spec, self.run_id = run_dir, spec, spec.run_id

    def record(self, kind: str, **fields: Any) -> None:
        """Drop the record."""


def run_spec_of(run_dir: str | os.PathLike, overrides: list[str] | tuple[str, ...] = ()) -> RunSpec:
    """The resolved spec a run folder was run with (``config.yaml``), with ``evaluation.*`` overrides."""
    run_dir = Path(run_dir)
    path = run_dir / CONFIG_FILE
    if not path.is_file():
        raise DataError(f"{path}: not a run folder (no {CONFIG_FILE})")
    for text in overrides:
        if not text.split("=", 1)[0].strip().startswith("evaluation."):
            raise ConfigError(f"--set {text}: only evaluation.* fields can change when re-evaluating a run")
    return spec_from_dict(apply_overrides(read_yaml(path), list(overrides)), source=str(path))


@contextlib.contextmanager
def _threads(count: int | None) -> Iterator[None]:
    previous = torch.get_num_threads()
    if count:
        torch.set_num_threads(int(count))
    try:
        yield
    finally:
        torch.set_num_threads(previous)


class TrainedModel:
    """A run's trained state (see the module docstring); build it with :func:`load_model`.

    Attributes:
        run_dir: the run folder.
        spec: its spec (with any ``evaluation.*`` overrides).
        checkpoint: the checkpoint's metadata (``epoch``, ``best``, ``which``).
        task: the registered task over the run's dataset, in memory, its state restored (``task.model`` is the
            torch module, ``task.embeddings`` a learnable embedding table when the run had one).
    """

    def __init__(self, run_dir: Path, spec: RunSpec, state: dict[str, Any], which: str, device: torch.device,
                 store: Any):
        from suite.registry import TASKS

        self.run_dir, self.spec, self.device = run_dir, spec, device
        self._state = state
        self.checkpoint = {"which": which, "epoch": int(state["epoch"]), "best": state.get("best")}
        self.store = store
        self.task = TASKS.get(spec.training.task)(spec, self.store, device)
        self.task.setup()
        self.task.load_state_dict(state["task"])
        self.model = self.task.model
        self.model.eval()

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, split: str = "test") -> dict[str, float]:
        """Metrics of ``split`` computed the way the run computed them (its system, sampling and buffer), with
        the thread count of the run's evaluation of that split (recorded in its ``eval`` records)."""
        if split not in ("valid", "test", "train"):
            raise ConfigError(f"--split: expected valid, test or train, got {split!r}")
        system = _system(self.run_dir, self.spec, self.store, self.device)
        epoch = self.checkpoint["epoch"]
        with _threads(self._eval_threads(split, epoch)):
            system.setup()
            try:
                system.restore_checkpoint(self._state, check_run=False)
                system.enter_pass((split, epoch))
                return system.evaluate(split)
            finally:
                system.teardown()

    def _eval_threads(self, split: str, epoch: int) -> int | None:
        for record in read_records(self.run_dir):
            if record.get("kind") == "eval" and record.get("split") == split and record.get("epoch") == epoch:
                return record.get("compute_threads")
        summary = read_summary(self.run_dir) or {}
        return (summary.get("machine") or {}).get("torch_threads")

    # ------------------------------------------------------------------ prediction
    @torch.no_grad()
    def predict_nodes(self, nodes: torch.Tensor) -> torch.Tensor:
        """``(len(nodes), num_classes)`` class probabilities of ``nodes`` (node classification; evaluation
        sampling, seeded as the run's evaluation is)."""
        self._require("node_classification", "predict --nodes")
        nodes = self._check_nodes(nodes)
        parts = list(self._node_batches(nodes, probabilities=True))
        return torch.cat(parts) if parts else torch.empty(0, self.store.num_classes or 0)

    @torch.no_grad()
    def _node_batches(self, nodes: torch.Tensor, probabilities: bool) -> Iterator[torch.Tensor]:
        """Per batch of ``evaluation.batch_size`` nodes: softmax probabilities or the encoder's raw outputs."""
        task = self.task
        generator = torch.Generator().manual_seed(self.spec.seed + 0x5EED)  # the task's evaluation seed
        for roots in nodes.split(self.spec.evaluation.batch_size):
            out = task.node_outputs(roots, generator).detach().float().cpu()
            yield torch.softmax(out, dim=-1) if probabilities else out

    @torch.no_grad()
    def score_triples(self, triples: torch.Tensor, top_k: int = 0) -> dict[str, torch.Tensor]:
        """Scores of ``(k, 3)`` ``(src, rel, dst)`` triples and the filtered ranks (1 = best; ties at their mean)
        of their tails among all entities and of their heads, known true triples (train+valid+test) removed;
        with ``top_k``, the ``top_k`` best filtered tails of every ``(src, rel, ?)``."""
        from suite.metrics import filtered_target_ranks

        self._require("link_prediction", "predict --triples")
        triples = self._check_triples(triples)
        task = self.task
        z = task.representations()
        known = task.triple_filter()
        decoder = self.model.decoder
        out: dict[str, list[torch.Tensor]] = {"score": [], "tail_rank": [], "head_rank": [], "top_tails": []}
        for part in triples.split(max(1, min(self.spec.evaluation.batch_size, (1 << 25) // max(len(z), 1)))):
            src, rel, dst = part.unbind(1)
            tail_queries = decoder.tail_query(z[src], rel)
            out["score"].append((tail_queries * z[dst]).sum(-1).cpu())
            scores = tail_queries @ z.T
            rows, columns = known.true_tails(src, rel)
            out["tail_rank"].append(filtered_target_ranks(scores, dst, rows, columns).cpu())
            if top_k:
                masked = scores.clone()
                masked[rows, columns] = float("-inf")
                out["top_tails"].append(masked.topk(min(top_k, len(z)), dim=1).indices.cpu())
            head_scores = decoder.head_query(z[dst], rel) @ z.T
            rows, columns = known.true_heads(dst, rel)
            out["head_rank"].append(filtered_target_ranks(head_scores, src, rows, columns).cpu())
        return {key: torch.cat(values) for key, values in out.items() if values}

    # ------------------------------------------------------------------ export
    def export(self, what: str, path: str | os.PathLike) -> Path:
        """Write ``what`` to ``path`` (format by suffix: ``.npy``, ``.parquet``, ``.csv``), streamed in batches,
        atomically; return the path.

        ``embeddings``: the learnable node embedding table (link prediction with ``learnable_embeddings``);
        ``encoded-nodes``: the encoder's output for every node (node classification: the class logits; link
        prediction: the representations the decoder scores); ``predictions``: predicted class and class
        probabilities of every node (node classification); ``relations``: the decoder's relation parameters
        (link prediction). Tables have a ``node`` (or ``relation``) column and one column per dimension ``d0``,
        ``d1``... (``predicted``, ``p0``, ``p1``... for predictions); ``.npy`` files hold the float32 matrix alone
        (row i = node i).
        """
        path = Path(path)
        kind = _file_format(path)
        if what not in EXPORTS:
            raise ConfigError(f"--what: expected one of {', '.join(EXPORTS)}, got {what!r}")
        rows, width, batches, names = self._export_source(what)
        with _StreamWriter(path, kind, rows, width, names, "relation" if what == "relations" else "node") as writer:
            for batch in batches:
                writer.write(batch)
        return path

    def _export_source(self, what: str) -> tuple[int, int, Iterator[np.ndarray], list[str]]:
        task, n, size = self.task, self.store.num_nodes, self.spec.evaluation.batch_size
        if what == "embeddings":
            table = getattr(task, "embeddings", None)
            if table is None:
                raise DataError(f"{self.run_dir}: the run has no learnable embeddings (model.learnable_embeddings "
                                f"is false or the task has none); export encoded-nodes instead")
            weight = table.weight
            batches = (weight[i:i + size].detach().numpy() for i in range(0, n, size))
            return n, weight.shape[1], batches, _columns(weight.shape[1])
        if what == "relations":
            self._require("link_prediction", "export --what relations")
            relations = self._relation_parameters()
            return (len(relations), relations.shape[1], iter([relations.numpy()]),
                    _columns(relations.shape[1]))
        if what == "predictions":
            self._require("node_classification", "export --what predictions")
            classes = self.store.num_classes or int(task.labels.max()) + 1
            batches = (np.concatenate([p.argmax(1, keepdim=True).numpy().astype(np.float32), p.numpy()], axis=1)
                       for p in self._node_batches(torch.arange(n), probabilities=True))
            return n, classes + 1, batches, ["predicted", *(f"p{c}" for c in range(classes))]
        if self.spec.training.task == "node_classification":
            classes = self.store.num_classes or int(task.labels.max()) + 1
            batches = (p.numpy() for p in self._node_batches(torch.arange(n), probabilities=False))
            return n, classes, batches, _columns(classes)
        return n, self.spec.model.embedding_dim, self._encoded_links(), _columns(self.spec.model.embedding_dim)

    @torch.no_grad()
    def _encoded_links(self) -> Iterator[np.ndarray]:
        for z in self.task.representation_batches():
            yield z.detach().float().cpu().numpy()

    def _relation_parameters(self) -> torch.Tensor:
        decoder = self.model.decoder
        parameters = [p.detach().float().cpu().reshape(p.shape[0], -1) for name, p in decoder.named_parameters()]
        return torch.cat(parameters, dim=1) if parameters else torch.empty(0, 0)

    # ------------------------------------------------------------------ checks
    def _require(self, task: str, what: str) -> None:
        if self.spec.training.task != task:
            raise ConfigError(f"{what}: needs a {task.replace('_', ' ')} run; {self.run_dir} is "
                              f"{self.spec.training.task.replace('_', ' ')}")

    def _check_nodes(self, nodes: torch.Tensor) -> torch.Tensor:
        nodes = torch.as_tensor(nodes, dtype=torch.int64).reshape(-1)
        bad = (nodes < 0) | (nodes >= self.store.num_nodes)
        if bool(bad.any()):
            row = int(torch.nonzero(bad)[0])
            raise DataError(f"nodes: row {row}: node id {int(nodes[row])} is out of range [0, {self.store.num_nodes})")
        return nodes

    def _check_triples(self, triples: torch.Tensor) -> torch.Tensor:
        triples = torch.as_tensor(triples, dtype=torch.int64)
        if triples.dim() != 2 or triples.shape[1] != 3:
            raise DataError(f"triples: expected (k, 3) rows 'src, rel, dst', got shape {tuple(triples.shape)}")
        for column, (what, high) in enumerate((("source", self.store.num_nodes),
                                               ("relation", self.store.num_relations),
                                               ("destination", self.store.num_nodes))):
            bad = (triples[:, column] < 0) | (triples[:, column] >= high)
            if bool(bad.any()):
                row = int(torch.nonzero(bad)[0])
                raise DataError(f"triples: row {row}: {what} id {int(triples[row, column])} is out of range "
                                f"[0, {high})")
        return triples


def read_ids(path: str | os.PathLike, columns: int) -> torch.Tensor:
    """Integer ids from a file: ``(k,)`` node ids (``columns=1``) or ``(k, 3)`` ``(src, rel, dst)`` triples.

    ``.npy``: an integer array of that shape; ``.parquet``: a ``node`` column, or ``src``, ``rel``, ``dst``
    columns (else the first ones); ``.csv`` / ``.tsv`` / ``.txt``: comma, tab or space separated integers, an
    optional header line.

    Raises:
        DataError: naming the file: missing, unreadable, not integers, or the wrong number of columns.
    """
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    suffix = path.suffix.lower()
    try:
        if suffix == ".npy":
            data = np.load(path, allow_pickle=False)
        elif suffix in (".parquet", ".pq"):
            frame = pd.read_parquet(path)
            wanted = ["node"] if columns == 1 else ["src", "rel", "dst"]
            data = (frame[wanted] if all(c in frame.columns for c in wanted) else frame.iloc[:, :columns]).to_numpy()
        else:
            import re

            lines = [line.strip() for line in path.read_text().splitlines()]
            rows = [re.split(r"[,\t ]+", line) for line in lines if line and not line.startswith("#")]
            if rows and not all(value.lstrip("-").isdigit() for value in rows[0]):
                rows = rows[1:]  # a header line
            if len({len(row) for row in rows}) > 1:
                raise ValueError("rows have different numbers of columns")
            if any(not value.lstrip("-").isdigit() for row in rows for value in row):
                raise ValueError("not integers")
            data = np.array(rows, dtype=np.int64).reshape(len(rows), len(rows[0]) if rows else columns)
    except (ValueError, OSError, KeyError, UnicodeDecodeError) as err:
        raise DataError(f"{path}: cannot read ids ({type(err).__name__}: {str(err).splitlines()[0]})") from None
    data = np.asarray(data)
    if columns == 1 and data.ndim == 2 and data.shape[1] == 1:
        data = data[:, 0]
    shape_ok = data.ndim == 1 if columns == 1 else (data.ndim == 2 and data.shape[1] == 3)
    if not shape_ok:
        raise DataError(f"{path}: expected {'one id per row' if columns == 1 else '3 ids per row (src, rel, dst)'}, "
                        f"got shape {data.shape}")
    try:
        as_int = data.astype(np.int64)
    except (ValueError, TypeError):
        raise DataError(f"{path}: ids must be integers") from None
    if data.dtype.kind == "f" and not np.array_equal(as_int, data):
        raise DataError(f"{path}: ids must be integers")
    if data.dtype.kind not in "iuf" and not np.array_equal(as_int.astype(str), data.astype(str)):
        raise DataError(f"{path}: ids must be integers")
    return torch.from_numpy(np.ascontiguousarray(as_int))


def _system(run_dir: Path, spec: RunSpec, store: Any, device: torch.device) -> Any:
    """The run's registered system, built to re-evaluate (``reevaluating``: it keeps what the run left)."""
    from suite.registry import SYSTEMS

    system = SYSTEMS.get(spec.system.name)(spec, store, device, _DiscardRecorder(run_dir, spec))
    system.reevaluating = True
    system.resume = True
    return system


def _columns(width: int) -> list[str]:
    return [f"d{i}" for i in range(width)]


def _file_format(path: Path) -> str:
    suffix = path.suffix.lower().lstrip(".")
    if suffix == "pq":
        suffix = "parquet"
    if suffix not in FORMATS:
        raise ConfigError(f"{path}: unsupported format {path.suffix or '(no suffix)'!r} (use .npy, .parquet or .csv)")
    return suffix


class _StreamWriter:
    """Writes ``(rows, width)`` float32 batches to ``path`` through a temporary file renamed on success.

    ``npy``: a memory-mapped array of the final shape; ``parquet``: one row group per batch (a leading ``node``
    or ``relation`` id column); ``csv``: appended text, header first (the same columns).
    """

    def __init__(self, path: Path, kind: str, rows: int, width: int, names: list[str], id_name: str = "node"):
        self.path, self.kind, self.rows, self.width, self.names = path, kind, rows, width, names
        self.id_name = id_name
        self.tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        self.offset = 0

    def __enter__(self) -> "_StreamWriter":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._open()
        except BaseException:  # __exit__ does not run when __enter__ fails: remove the temporary file here
            self.tmp.unlink(missing_ok=True)
            raise
        return self

    def _open(self) -> None:
        if self.kind == "npy":
            from suite.data.npy import NpyAppender

            # plain writes, not a memory map: a full disk is an ENOSPC naming the file, not a SIGBUS
            self.array = NpyAppender(self.tmp, np.float32, (self.width,))
        elif self.kind == "parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            self.schema = pa.schema([(self.id_name, pa.int64()), *((name, pa.float32()) for name in self.names)])
            self.writer = pq.ParquetWriter(self.tmp, self.schema)
        else:
            self.handle = open_write(self.tmp, "w")
            write_to(self.handle, ",".join([self.id_name, *self.names]) + "\n", self.tmp)

    def write(self, batch: np.ndarray) -> None:
        batch = np.asarray(batch, dtype=np.float32).reshape(len(batch), self.width)
        ids = np.arange(self.offset, self.offset + len(batch), dtype=np.int64)
        if self.kind == "npy":
            self.array.append(batch)
        elif self.kind == "parquet":
            import pyarrow as pa

            check_write(self.tmp)
            columns = [pa.array(ids), *(pa.array(batch[:, i]) for i in range(self.width))]
            self.writer.write_table(pa.Table.from_arrays(columns, schema=self.schema))
        else:
            text = io.StringIO()
            np.savetxt(text, np.concatenate([ids[:, None].astype(np.float64), batch.astype(np.float64)], 1),
                       delimiter=",", fmt=["%d"] + ["%.9g"] * self.width)
            write_to(self.handle, text.getvalue(), self.tmp)
        self.offset += len(batch)

    def __exit__(self, kind, error, traceback) -> None:
        try:
            if error is not None:  # close quietly: the first error is the one reported
                with contextlib.suppress(OSError):
                    self._close()
                return
            self._close()
            if self.offset != self.rows:
                raise RuntimeError(f"{self.path}: wrote {self.offset} rows, expected {self.rows}")
            rename(self.tmp, self.path)
        finally:
            self.tmp.unlink(missing_ok=True)


    def _close(self) -> None:
        if self.kind == "npy":
            self.array.close()
        elif self.kind == "parquet":
            self.writer.close()
        else:
            sync_file(self.handle, self.tmp)
            close_file(self.handle, self.tmp)


def load_model(run_dir: str | os.PathLike, which: str = "last", *, device: str = "cpu",
               overrides: list[str] | tuple[str, ...] = ()) -> TrainedModel:
    """The trained state of a run folder, ready to evaluate, predict and export.

    Args:
        run_dir: ``OUT/<run_id>`` of a run (complete, or killed after a checkpoint).
        which: ``last`` (the state the run's final metrics were computed from) or ``best`` (the best validation
            metric's epoch).
        device: where the model runs.
        overrides: ``evaluation.*`` changes (``["evaluation.batch_size=512"]``).

    Example:
        >>> import suite
        >>> model = suite.load_model("out/runs/cora-graphsage-s0-0123456789ab")  # doctest: +SKIP
        >>> model.evaluate("test")                                              # doctest: +SKIP
        {'accuracy': 0.803}

    Raises:
        DataError: not a run folder, no checkpoint (one line naming the file).
    """
    from suite.checkpoint import checkpoint_path, load_checkpoint

    run_dir = Path(run_dir)
    spec = run_spec_of(run_dir, overrides)
    if which not in ("last", "best"):
        raise ConfigError(f"--checkpoint: expected last or best, got {which!r}")
    from suite.datasets import open_dataset

    path = checkpoint_path(run_dir, which)
    original = run_spec_of(run_dir)
    store = open_dataset(spec.dataset)
    device = torch.device(device)
    if path.is_file():
        state = load_checkpoint(path)
    else:
        state = _system_state(run_dir, spec, store, device, which, path)
    if state.get("run_id") != original.run_id:
        raise DataError(f"{path}: the checkpoint is of run {state.get('run_id')!r}, not {original.run_id!r}")
    return TrainedModel(run_dir, spec, state, which, device, store)


def _system_state(run_dir: Path, spec: RunSpec, store: Any, device: torch.device, which: str,
                  path: Path) -> dict[str, Any]:
    """The state a system keeps itself instead of checkpoint files (the disk system's link prediction)."""
    from suite.checkpoint import load_checkpoint
    from suite.registry import SYSTEMS

    system_class = SYSTEMS.get(spec.system.name)
    system = _system(run_dir, spec, store, device)
    if not getattr(type(system), "keeps_own_checkpoints", False) or not any(run_dir.glob("*/manifest.json")):
        return load_checkpoint(path)  # raises: no checkpoint
    if which != "last":
        raise DataError(f"{run_dir}: {system_class.__name__} keeps its last committed epoch only (no best "
                        f"checkpoint); use --checkpoint last")
    system.setup()
    try:
        return system.saved_state()
    finally:
        system.teardown()


__all__ = ["EXPORTS", "FORMATS", "TrainedModel", "load_model", "read_ids", "run_spec_of"]
