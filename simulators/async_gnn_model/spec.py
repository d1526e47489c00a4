"""The asynchronous GNN pipeline simulation's spec: typed, frozen, validated; loaded from YAML.

A spec names a graph (sizes, or a dataset cut into partitions), where the stage durations come from, the pipeline
(layers, iterations, workers, asynchrony bounds) and the modes to compare. Errors name the file and the field on
one line (:func:`async_spec_from_dict`, :func:`load_async_spec`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from suite.config import DatasetSpec, read_yaml, validated
from suite.errors import ConfigError

STAGES = ("aggregate", "update", "activation")
"""Stages of a layer in forward order (the backward runs them reversed)."""

Stage = Literal["aggregate", "update", "activation"]
class _Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


def _all_stages(mapping: Mapping[str, Any], field: str) -> None:
    missing = [stage for stage in STAGES if stage not in mapping]
    if missing:
        raise ValueError(f"{field}: missing stage(s) {', '.join(missing)} (need {', '.join(STAGES)})")


class UniformGraphSpec(_Spec):
    """P equal partitions of a graph given by its sizes; which partitions neighbour which is a pattern."""

    kind: Literal["uniform"]
    num_nodes: int = Field(gt=0)
    num_edges: int = Field(ge=0)
    max_degree: int = Field(gt=0, description="d of every partition")
    num_partitions: int = Field(gt=0)
    neighbours: Literal["all", "ring", "none"] = Field("all", description="partitions each one reads from")


class DatasetGraphSpec(_Spec):
    """A real graph (the dataset registry) cut into P partitions."""

    kind: Literal["dataset"]
    dataset: DatasetSpec
    num_partitions: int = Field(gt=0)
    partitioner: Literal["random", "contiguous"] = "random"


class FixedDurations(_Spec):
    """The same forward duration (seconds) for a stage in every layer and partition."""

    source: Literal["fixed"]
    forward: dict[Stage, Annotated[float, Field(gt=0)]]

    @model_validator(mode="after")
    def _complete(self) -> "FixedDurations":
        _all_stages(self.forward, "forward")
        return self


class TableDurations(_Spec):
    """Forward durations (seconds) per stage and partition (lists of P values), e.g. measured elsewhere."""

    source: Literal["table"]
    forward: dict[Stage, list[Annotated[float, Field(gt=0)]]]

    @model_validator(mode="after")
    def _complete(self) -> "TableDurations":
        _all_stages(self.forward, "forward")
        return self


class WorkDepthDurations(_Spec):
    """Durations from the work-depth costs of a model's stages: ``W / ops_per_s[stage] + D * op_latency_s``."""

    source: Literal["workdepth"]
    model: str = Field("gcn", description="a work-depth model with a stage split (gcn, graphsage, gin, gat...)")
    features: int = Field(128, gt=0, description="k")
    ops_per_s: dict[Stage, Annotated[float, Field(gt=0)]] = Field(
        default_factory=lambda: {"aggregate": 2e9, "update": 2e10, "activation": 5e9})
    op_latency_s: float = Field(1e-8, ge=0, description="time of one dependent step (the depth term)")

    @model_validator(mode="after")
    def _complete(self) -> "WorkDepthDurations":
        _all_stages(self.ops_per_s, "ops_per_s")
        return self


class MeasuredDurations(_Spec):
    """Durations of torch kernels timed per partition on the real graph (needs ``graph.kind: dataset``)."""

    source: Literal["measured"]
    features: int = Field(128, gt=0, description="k")
    repeats: int = Field(5, gt=0, description="timed repeats per kernel (the median is used)")
    threads: int = Field(1, gt=0, description="torch threads while timing")


class PipelineSpec(_Spec):
    """Shape of the pipeline and its asynchrony bounds."""

    layers: int = Field(2, gt=0)
    iterations: int = Field(4, gt=0)
    workers: dict[Stage, Annotated[int, Field(gt=0)]] = Field(
        default_factory=lambda: {stage: 1 for stage in STAGES}, description="workers per (layer, stage)")
    backward: bool = Field(True, description="simulate the backward pass and the weight update")
    backward_factor: dict[Stage, Annotated[float, Field(gt=0)]] = Field(
        default_factory=lambda: {"aggregate": 1.0, "update": 2.0, "activation": 1.0},
        description="backward duration / forward duration per stage")
    staleness_bound: int = Field(1, ge=0, description="iterations a read value may lag in asynchronous modes")
    fb_pipeline: bool = Field(False, description="overlap iteration t+1's forward with iteration t's backward")
    jitter: float = Field(0.0, ge=0, description="std of log-normal noise on every task's duration")

    @model_validator(mode="after")
    def _complete(self) -> "PipelineSpec":
        _all_stages(self.workers, "workers")
        _all_stages(self.backward_factor, "backward_factor")
        return self


MODE_NAMES = ("sync-sync", "async-sync", "sync-async", "async-async")
"""``<micro>-<macro>`` execution modes."""


class AsyncSpec(_Spec):
    """One asynchronous-pipeline simulation: a graph, durations, a pipeline and the modes to compare."""

    name: str = "async-gnn"
    graph: UniformGraphSpec | DatasetGraphSpec = Field(discriminator="kind")
    durations: FixedDurations | TableDurations | WorkDepthDurations | MeasuredDurations = Field(
        discriminator="source")
    pipeline: PipelineSpec = Field(default_factory=PipelineSpec)
    modes: list[Literal["sync-sync", "async-sync", "sync-async", "async-async"]] = Field(
        default_factory=lambda: list(MODE_NAMES))
    seed: int = 0

    @model_validator(mode="after")
    def _consistent(self) -> "AsyncSpec":
        if isinstance(self.durations, TableDurations):
            for stage, values in self.durations.forward.items():
                if len(values) != self.graph.num_partitions:
                    raise ValueError(f"durations: forward.{stage}: expected {self.graph.num_partitions} values (one "
                                     f"per partition, graph.num_partitions), got {len(values)}")
        if isinstance(self.durations, MeasuredDurations) and not isinstance(self.graph, DatasetGraphSpec):
            raise ValueError("durations: source 'measured' needs graph.kind 'dataset' (a real graph to time on)")
        if not self.modes:
            raise ValueError("modes: at least one mode")
        return self


def async_spec_from_dict(data: Any, source: str = "<spec>") -> AsyncSpec:
    """Validate plain data into an :class:`AsyncSpec`; errors name ``source`` and the field path on one line."""
    spec = validated(AsyncSpec, data, source)
    if isinstance(spec.durations, WorkDepthDurations):
        from simulators.work_depth_model import MODELS

        if spec.durations.model not in MODELS or MODELS.get(spec.durations.model).stages is None:
            known = ", ".join(x for x in MODELS if MODELS.get(x).stages)
            raise ConfigError(f"{source}: durations.model: unknown or without a stage split: "
                              f"{spec.durations.model!r} (known: {known})")
    return spec


def load_async_spec(path: str | Path) -> AsyncSpec:
    """Load and validate a YAML spec (see ``experiments/specs/async_gnn.yaml``)."""
    return async_spec_from_dict(read_yaml(path), source=str(path))


__all__ = ["AsyncSpec", "DatasetGraphSpec", "FixedDurations", "MODE_NAMES", "MeasuredDurations", "PipelineSpec",
           "STAGES", "Stage", "TableDurations", "UniformGraphSpec", "WorkDepthDurations", "async_spec_from_dict",
           "load_async_spec"]
