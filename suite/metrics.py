"""Measurements shared by all systems: stage timers, classification accuracy, GPU utilization sampling.

Names matter: *compute utilization* is the busy time of the compute stage divided by wall time (what the suite
can measure on any device); *GPU utilization* is NVML's reading, only on CUDA. Summaries say which is which.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import defaultdict
from collections.abc import Iterator

import torch


class StageTimer:
    """Accumulates busy seconds per named stage (``with timer.stage("sample"): ...``).

    On CUDA, pass ``sync_device`` so that a stage's time includes its asynchronous GPU work.
    """

    def __init__(self, sync_device: torch.device | None = None):
        self.busy_s: dict[str, float] = defaultdict(float)
        self._sync = sync_device if sync_device is not None and sync_device.type == "cuda" else None

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the block as busy time of ``name``."""
        started = time.perf_counter()
        try:
            yield
        finally:
            if self._sync is not None:
                torch.cuda.synchronize(self._sync)
            self.busy_s[name] += time.perf_counter() - started

    def snapshot(self) -> dict[str, float]:
        """A copy of the busy seconds per stage."""
        return dict(self.busy_s)


def accuracy(logits_or_predictions: torch.Tensor, labels: torch.Tensor) -> float:
    """Fraction of correct predictions through the OGB node-property Evaluator (multiclass accuracy)."""
    from suite.graph.loaders.ogb import import_ogb

    Evaluator = import_ogb().nodeproppred.Evaluator
    predictions = logits_or_predictions
    if predictions.dim() == 2:
        predictions = predictions.argmax(dim=-1)
    if labels.numel() == 0:
        return float("nan")
    result = Evaluator(name="ogbn-arxiv").eval(
        {"y_true": labels.view(-1, 1).cpu(), "y_pred": predictions.view(-1, 1).cpu()}
    )
    return float(result["acc"])


class GpuUtilizationSampler:
    """Samples NVML GPU utilization in a background thread while active; ``mean()`` is None without CUDA/NVML."""

    def __init__(self, device: torch.device, interval_s: float = 0.1):
        self.samples: list[float] = []
        self._handle = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.interval_s = interval_s
        if device.type == "cuda":
            try:
                import pynvml

                pynvml.nvmlInit()
                index = device.index if device.index is not None else torch.cuda.current_device()
                self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
                self._nvml = pynvml
            except Exception:  # NVML missing or unusable: report None rather than guess
                self._handle = None

    def __enter__(self) -> "GpuUtilizationSampler":
        if self._handle is not None:
            self._thread = threading.Thread(target=self._loop, name="nvml-sampler", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.samples.append(self._nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu / 100.0)

    def mean(self) -> float | None:
        """Mean utilization in [0, 1], or None when not measured."""
        return sum(self.samples) / len(self.samples) if self.samples else None
