"""The one message type that flows through every stage of every system: :class:`Batch`.

A batch is created with its roots when an epoch is planned, filled in by the stages (``load`` sets the sample,
features and labels; ``transfer`` moves them to the device; ``compute`` sets the loss and the version of the
parameters its gradient was applied to) and stamped with the interval each stage spent on it. Synchronous and
pipelined systems pass the same object through the same stage functions, so their records have one schema.

Randomness per batch: the sampler of batch ``i`` of epoch ``e`` draws from its own generator, seeded from
``(seed, e, i)`` by :func:`batch_generator`. A batch's sample therefore does not depend on which worker loads it
or in which order batches are loaded: the synchronous baseline and a pipeline with any number of loader workers
sample the same subgraphs.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import torch

from suite.stage_trace import StageStamp, stage_fields
from systems.sampling.sampler import SampledSubgraph


@dataclass
class Batch:
    """One mini-batch and everything the stages attach to it.

    Attributes:
        epoch: the epoch the batch belongs to.
        index: its position in the epoch's planned order (0-based).
        roots: ids of the training examples (node classification: global ids of the labeled nodes to predict;
            link prediction: positions of the batch's edges in the ``train_edges`` split).
        sample: the sampled multi-hop neighbourhood (set by ``load``).
        x: input features of ``sample.input_nodes`` (set by ``load``; on the device after ``transfer``).
        y: labels of the roots (set by ``load``; on the device after ``transfer``).
        loss: the training loss of the batch (set by ``compute``).
        version_read: optimizer steps applied when the batch was admitted, i.e. the version of the model state
            (parameters, embedding tables) it could read while being prepared.
        version_applied: optimizer steps applied before the batch's own step (set by ``compute``).
        admitted: ``perf_counter`` time the batch was admitted (took a staleness token).
        stamps: per stage, when it worked on the batch and which worker did.
        ready: an event the ``compute`` stage waits on before reading the transferred tensors (a CUDA event
            recorded on the transfer stream; None on the CPU).
        extra: task- or system-specific payload (e.g. embedding rows and their gradients for ``update``).
    """

    epoch: int
    index: int
    roots: torch.Tensor
    sample: SampledSubgraph | None = None
    x: torch.Tensor | None = None
    y: torch.Tensor | None = None
    loss: float | None = None
    version_read: int = 0
    version_applied: int = 0
    admitted: float = 0.0
    stamps: dict[str, StageStamp] = field(default_factory=dict)
    ready: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def staleness(self) -> int:
        """Optimizer steps between the state the batch read and the step its gradient was applied to."""
        return self.version_applied - self.version_read

    @property
    def num_examples(self) -> int:
        """Training examples in the batch."""
        return len(self.roots)

    def pin_memory(self) -> "Batch":
        """Page-lock the host tensors (``torch.utils.data.DataLoader(pin_memory=True)`` calls this)."""
        self.x = self.x.pin_memory() if self.x is not None else None
        self.y = self.y.pin_memory() if self.y is not None else None
        return self

    def record(self, origin: float = 0.0) -> dict[str, Any]:
        """The batch as one flat record: ids, staleness and per-stage start/end/worker (no tensors); times in
        seconds from ``origin`` (e.g. the epoch's start)."""
        record: dict[str, Any] = {"epoch": self.epoch, "index": self.index, "examples": self.num_examples,
                                  "admitted": self.admitted - origin, "version_read": self.version_read,
                                  "version_applied": self.version_applied, "staleness": self.staleness,
                                  "loss": self.loss}
        if self.sample is not None:
            record["sampled_edges"] = self.sample.num_sampled_edges
            record["input_nodes"] = len(self.sample.input_nodes)
        record.update(stage_fields(self.stamps, origin))
        return record


def batch_seed(seed: int, epoch: int, index: int) -> int:
    """A 63-bit seed for batch ``index`` of ``epoch`` of a run seeded with ``seed`` (independent streams)."""
    digest = hashlib.blake2b(f"{seed}:{epoch}:{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & ((1 << 63) - 1)


def batch_generator(seed: int, epoch: int, index: int) -> torch.Generator:
    """The CPU generator batch ``index`` of ``epoch`` samples from (see :func:`batch_seed`)."""
    return torch.Generator().manual_seed(batch_seed(seed, epoch, index))


def plan_epoch(examples: torch.Tensor, batch_size: int, epoch: int, seed: int) -> list[Batch]:
    """The epoch's batches: ``examples`` shuffled by a generator seeded from ``(seed, epoch)``, then split.

    The order depends only on the seed and the epoch, not on how many epochs or batches ran before.
    """
    order = torch.randperm(len(examples), generator=torch.Generator().manual_seed(batch_seed(seed, epoch, -1)))
    return [Batch(epoch=epoch, index=i, roots=roots)
            for i, roots in enumerate(examples[order].split(batch_size))]


__all__ = ["Batch", "StageStamp", "batch_generator", "batch_seed", "plan_epoch"]
