"""Checkpoints of a run: the last and the best state, written atomically into ``RUN_DIR/checkpoints/``.

A checkpoint (``last.pt``, ``best.pt``; ``torch.save`` of plain data, read back with ``weights_only=True``) holds:

- ``format``, ``run_id``, ``epoch`` (the last finished epoch, 0-based) and ``epochs`` (the spec's count);
- ``task``: the task's learnable state (:meth:`systems.tasks.task.Task.state_dict`): the model's and the
  optimizer's state dicts, the optimizer step count, a learnable embedding table with its Adagrad state;
- ``rng``: torch's global CPU generator (dropout draws from it) and, on CUDA, the device generators (everything
  else the suite draws comes from generators seeded from ``(seed, epoch, batch)``);
- ``history``: per finished epoch, its time, its :class:`~systems.system.EpochStats` and its validation and test
  metrics (a resumed run replays them into its records and summary);
- ``best``: the main validation metric (``accuracy``, ``mrr``) and the epoch of the best checkpoint so far;
- ``system``: what a system keeps beside the task's state (e.g. nothing: the disk system recomputes its buffer
  layout from the plans).

``last.pt`` is written every ``training.checkpoint_every`` epochs and after the last epoch; ``best.pt`` whenever the
main validation metric improves (higher is better). Each file is written to a temporary name, flushed to disk
(``fsync``) and renamed over the old one, so a run killed at any moment leaves the previous checkpoint or the new
one, never a torn file.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import torch

from suite.errors import DataError, describe_os_error
from suite.io import check_read, flush_to, fsync_dir, rename, write_to, writing

CHECKPOINT_DIR = "checkpoints"
LAST = "last.pt"
BEST = "best.pt"
FORMAT = 1


def checkpoint_path(run_dir: str | os.PathLike, which: str = "last") -> Path:
    """``RUN_DIR/checkpoints/<which>.pt`` (``which``: ``last`` or ``best``)."""
    if which not in ("last", "best"):
        raise ValueError(f"which: expected 'last' or 'best', got {which!r}")
    return Path(run_dir) / CHECKPOINT_DIR / (LAST if which == "last" else BEST)


def save_atomically(state: dict[str, Any], path: Path) -> None:
    """``torch.save`` ``state`` to ``path`` through a temporary file that is fsynced and renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with writing(tmp, "wb", sync=True) as handle:
            sink = _SeamWriter(handle, path)
            try:
                torch.save(state, sink)
            except Exception:
                if sink.error is not None:  # torch's zip writer turns a failed write into a RuntimeError
                    raise sink.error from None
                raise
        rename(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)


class _SeamWriter:
    """The file-like object ``torch.save`` writes to: every write goes through the IO seam (its errors name the
    checkpoint)."""

    def __init__(self, handle: Any, path: Path) -> None:
        self._handle, self._path = handle, path
        self.error: OSError | None = None

    def write(self, data: Any) -> int:
        try:
            write_to(self._handle, data, self._path)
        except OSError as err:
            self.error = self.error or err
            raise
        return memoryview(data).nbytes

    def flush(self) -> None:
        flush_to(self._handle, self._path)


def load_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_atomically` (``weights_only``: plain data and tensors only).

    Raises:
        DataError: naming the file when it is missing, unreadable or not a checkpoint of this format.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no checkpoint (the run wrote none: training.checkpoint_every: 0, or it was "
                        f"killed before its first)")
    try:
        check_read(path)
        state = torch.load(path, map_location=map_location, weights_only=True)
    except OSError as err:
        raise DataError(f"{path}: cannot read the checkpoint ({describe_os_error(err)})") from None
    except Exception as err:  # torch raises many kinds for a corrupt file
        raise DataError(f"{path}: cannot read the checkpoint ({type(err).__name__}: {str(err).splitlines()[0]})") \
            from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise DataError(f"{path}: not a gnnsuite checkpoint of format {FORMAT}")
    return state


def rng_state() -> dict[str, Any]:
    """The global generators a run draws from outside its seeded per-batch generators (torch CPU, CUDA)."""
    state: dict[str, Any] = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`rng_state` returned. The states are byte tensors that torch takes on the CPU only; a
    checkpoint loaded with ``map_location`` a CUDA device holds them there, so they are moved back first."""
    torch.set_rng_state(state["torch"].cpu())
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([generator_state.cpu() for generator_state in state["cuda"]])


def improved(value: float | None, best: float | None) -> bool:
    """Whether the validation metric ``value`` beats ``best`` (higher is better; NaN never does)."""
    if value is None or not math.isfinite(value):
        return False
    return best is None or value > best


__all__ = ["BEST", "CHECKPOINT_DIR", "FORMAT", "LAST", "checkpoint_path", "improved", "load_checkpoint",
           "rng_state", "save_atomically", "set_rng_state"]
