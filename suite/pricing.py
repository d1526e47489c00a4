"""Machine profiles with hourly prices, and the dollar cost of a run.

A :class:`MachineProfile` is a machine a run is priced on: its hourly price (with the source and the date the price
was read), and its shape (CPUs, memory, GPUs). Profiles are registered by name in
:data:`suite.registry.MACHINES`; a run spec picks one with ``machine.profile`` (and ``machine.hourly_usd`` prices the
user-priced ``local`` profile, or overrides any other).

Built-in profiles are AWS EC2 on-demand instances, Linux, region us-east-1, as listed on the AWS price list
(https://aws.amazon.com/ec2/pricing/on-demand/). MariusGNN (EuroSys 2023) priced its runs with P3 on-demand prices
(``p3.2xlarge`` for its single-GPU runs, ``p3.8xlarge`` / ``p3.16xlarge`` for the multi-GPU baselines); the
CPU-only ``m6a.large`` (2 vCPUs) prices runs measured on a 2-core machine such as the one the reference results
come from. Prices change: every profile says where its price comes from and when it was read, and a summary carries
both, so a number in a table can always be traced back. To price on another machine, register another profile::

    from suite.pricing import MachineProfile, register_profile

    register_profile(MachineProfile(name="my-box", hourly_usd=0.80, price_source="amortized purchase",
                                    price_date="2026-01-01", cpus=32, memory_gib=256, gpus=1,
                                    gpu_model="NVIDIA RTX 4090", region=None, notes=""))

The cost functions are pure: they take a profile (or its registered name), times in seconds and optionally an
hourly price that overrides the profile's; they return US dollars, or ``None`` when no price is known (the
``local`` profile without ``machine.hourly_usd``). Billing is per second, without AWS's 60-second minimum.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from suite.registry import MACHINES

SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True)
class MachineProfile:
    """A machine runs are priced on.

    Attributes:
        name: the registered name (``p3.2xlarge``, ``local``...).
        hourly_usd: on-demand price per hour in US dollars; ``None`` when unknown (user-priced).
        price_source: where the price was read (a URL or a description).
        price_date: when the price was read (ISO date, ``YYYY-MM-DD``).
        cpus: virtual CPUs.
        memory_gib: main memory in GiB.
        gpus: number of GPUs.
        gpu_model: the GPU model (``None`` without GPUs or when unknown).
        region: the cloud region the price is for (``None`` for a local machine).
        notes: anything a reader of the price needs to know (price changes, what is excluded).
    """

    name: str
    hourly_usd: float | None
    price_source: str
    price_date: str
    cpus: int
    memory_gib: float
    gpus: int
    gpu_model: str | None
    region: str | None
    notes: str = ""

    def __post_init__(self) -> None:
        if self.hourly_usd is not None and not (math.isfinite(self.hourly_usd) and self.hourly_usd >= 0):
            raise ValueError(f"machine profile {self.name!r}: hourly_usd must be a finite number >= 0")

    def to_dict(self) -> dict[str, Any]:
        """The profile as plain data (for ``summary.json``)."""
        return asdict(self)


def register_profile(profile: MachineProfile) -> MachineProfile:
    """Register ``profile`` in :data:`~suite.registry.MACHINES` under its name; return it."""
    MACHINES.register(profile.name, profile)
    return profile


def get_profile(profile: MachineProfile | str) -> MachineProfile:
    """The profile itself, or the one registered under that name (``ConfigError`` naming the known ones)."""
    if isinstance(profile, MachineProfile):
        return profile
    return MACHINES.get(profile)


# ---------------------------------------------------------------------------------------------- the profiles
_AWS_PRICE_LIST = "https://aws.amazon.com/ec2/pricing/on-demand/ (Linux, us-east-1, on-demand)"
_READ_ON = "2026-11-30"
_HOW_READ = (
    "Read from copies of the AWS EC2 price list (the session that wrote this had no access to aws.amazon.com); "
    "cross-checked across independent public price tables."
)

_V100 = "NVIDIA Tesla V100 16GB"


def _aws_instance(name: str, hourly_usd: float, cpus: int, memory_gib: float, gpus: int, gpu_model: str | None,
                  notes: str = "") -> MachineProfile:
    """An on-demand us-east-1 instance priced from :data:`_AWS_PRICE_LIST` on :data:`_READ_ON`; ``notes`` are
    followed by how the price was read."""
    return MachineProfile(
        name=name, hourly_usd=hourly_usd, price_source=_AWS_PRICE_LIST, price_date=_READ_ON, cpus=cpus,
        memory_gib=memory_gib, gpus=gpus, gpu_model=gpu_model, region="us-east-1",
        notes=f"{notes} {_HOW_READ}" if notes else _HOW_READ,
    )


AWS_PROFILES: tuple[MachineProfile, ...] = (
    _aws_instance("p3.2xlarge", 3.06, cpus=8, memory_gib=61, gpus=1, gpu_model=_V100,
                  notes="The machine of MariusGNN's single-GPU runs; unchanged since P3's launch in 2017."),
    _aws_instance("p3.8xlarge", 12.24, cpus=32, memory_gib=244, gpus=4, gpu_model=_V100,
                  notes="4 x p3.2xlarge's price; unchanged since 2017."),
    _aws_instance("p3.16xlarge", 24.48, cpus=64, memory_gib=488, gpus=8, gpu_model=_V100,
                  notes="8 x p3.2xlarge's price; unchanged since 2017."),
    _aws_instance("g5.xlarge", 1.006, cpus=4, memory_gib=16, gpus=1, gpu_model="NVIDIA A10G 24GB"),
    _aws_instance(
        "p4d.24xlarge", 21.957642, cpus=96, memory_gib=1152, gpus=8, gpu_model="NVIDIA A100 40GB",
        notes=("Price after AWS's June 2025 GPU price reduction (P4d on-demand cut by 33%, effective 2025-06-01); "
               "it was $32.7726/h before (the price in papers of 2020-2025; use machine.hourly_usd=32.7726 to "
               "reproduce them)."),
    ),
)


# CPU-only instances, to price runs measured on a machine without a GPU at the price of a comparable cloud instance
# (``machine.hourly_usd``, or ``experiments/figures/cost.py --price-local-as``). Not in AWS_PROFILES (the GPU machines).
CPU_PROFILES: tuple[MachineProfile, ...] = (
    _aws_instance(
        "m6a.large", 0.0864, cpus=2, memory_gib=8, gpus=0, gpu_model=None,
        notes=("2 vCPUs of a 3rd-generation AMD EPYC, 8 GiB: the cloud instance closest to the 2-core AMD EPYC "
               "virtual machine the suite's reference results are measured on (which has more memory: a run "
               "priced at this instance's price is comparable only if its peak RSS fits in 8 GiB)."),
    ),
)


def _local_memory_gib() -> float:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        return 0.0


def _local_gpus() -> tuple[int, str | None]:
    """NVIDIA GPUs as the Linux driver lists them (without importing torch); (0, None) elsewhere."""
    models = []
    for info in sorted(Path("/proc/driver/nvidia/gpus").glob("*/information")):
        try:
            for line in info.read_text().splitlines():
                if line.startswith("Model:"):
                    models.append(line.split(":", 1)[1].strip())
        except OSError:
            continue
    return len(models), (models[0] if models else None)


def _local_profile() -> MachineProfile:
    gpus, gpu_model = _local_gpus()
    return MachineProfile(
        name="local", hourly_usd=None, price_source="user (machine.hourly_usd)", price_date="",
        cpus=os.cpu_count() or 0, memory_gib=round(_local_memory_gib(), 2), gpus=gpus, gpu_model=gpu_model,
        region=None,
        notes="The machine running the suite (shape detected at start-up); unpriced unless the run spec gives "
              "machine.hourly_usd.",
    )


for _profile in (*AWS_PROFILES, *CPU_PROFILES, _local_profile()):
    if _profile.name not in MACHINES:
        register_profile(_profile)


# ---------------------------------------------------------------------------------------------- pricing
def hourly_price(profile: MachineProfile | str, hourly_usd: float | None = None) -> float | None:
    """The hourly price to use: ``hourly_usd`` when given, else the profile's (``None`` when neither)."""
    if hourly_usd is not None:
        if not (math.isfinite(hourly_usd) and hourly_usd >= 0):
            raise ValueError(f"hourly_usd must be a finite number >= 0, got {hourly_usd!r}")
        return float(hourly_usd)
    return get_profile(profile).hourly_usd


def _check_seconds(seconds: float) -> float:
    if not (math.isfinite(seconds) and seconds >= 0):
        raise ValueError(f"seconds must be a finite number >= 0, got {seconds!r}")
    return float(seconds)


def run_cost_usd(profile: MachineProfile | str, seconds: float, hourly_usd: float | None = None) -> float | None:
    """Dollar cost of ``seconds`` on ``profile``.

    Args:
        profile: a profile or its registered name.
        seconds: time billed.
        hourly_usd: price per hour overriding the profile's.

    Returns:
        ``seconds / 3600 * price``, or ``None`` when no price is known.
    """
    seconds = _check_seconds(seconds)
    price = hourly_price(profile, hourly_usd)
    return None if price is None else seconds / SECONDS_PER_HOUR * price


def cost_per_epoch(profile: MachineProfile | str, epoch_times: Sequence[float],
                   hourly_usd: float | None = None) -> float | None:
    """Mean dollar cost of one training epoch.

    Args:
        profile: a profile or its registered name.
        epoch_times: wall time of every training epoch, in seconds.
        hourly_usd: price per hour overriding the profile's.

    Returns:
        The cost of all epochs divided by their number; ``None`` without epochs or without a price.
    """
    if not epoch_times:
        return None
    total = run_cost_usd(profile, sum(_check_seconds(t) for t in epoch_times), hourly_usd)
    return None if total is None else total / len(epoch_times)


def epochs_to_target(valid_curve: Iterable[tuple[int, float | None]], target: float) -> int | None:
    """Number of training epochs done when validation first reached ``target`` (``None`` if it never did).

    Args:
        valid_curve: ``(epoch, metric)`` of every validation, epochs numbered from 0 as systems record them
            (a validation at epoch ``e`` follows ``e + 1`` training epochs); a ``None`` metric never reaches.
        target: the metric to reach (at or above).
    """
    reached = [epoch for epoch, metric in valid_curve
               if metric is not None and not math.isnan(metric) and metric >= target]
    return min(reached) + 1 if reached else None


def cost_to_target(profile: MachineProfile | str, epoch_times: Sequence[float],
                   valid_curve: Iterable[tuple[int, float | None]], target: float | None,
                   hourly_usd: float | None = None) -> float | None:
    """Dollar cost of training until validation first reaches ``target``.

    The time priced is the training time (evaluation excluded, as in ``epoch_time_s``) of the epochs up to and
    including the one after which the first validation at or above ``target`` ran.

    Args:
        profile: a profile or its registered name.
        epoch_times: wall time of every training epoch, in seconds (epoch 0 first).
        valid_curve: ``(epoch, metric)`` of every validation, epochs numbered from 0.
        target: the validation metric to reach; ``None`` means no target.
        hourly_usd: price per hour overriding the profile's.

    Returns:
        The cost, or ``None`` when there is no target, it was never reached, or no price is known.

    Raises:
        ValueError: the target was reached at an epoch with no recorded epoch time.
    """
    if target is None:
        return None
    epochs = epochs_to_target(valid_curve, target)
    if epochs is None:
        return None
    if epochs > len(epoch_times):
        raise ValueError(f"target reached after epoch {epochs - 1} but only {len(epoch_times)} epoch times given")
    return run_cost_usd(profile, sum(_check_seconds(t) for t in epoch_times[:epochs]), hourly_usd)


def time_to_target(epoch_times: Sequence[float], valid_curve: Iterable[tuple[int, float | None]],
                   target: float | None) -> dict[str, Any] | None:
    """When a run first reached its validation target, MLPerf style: ``{target, reached, epochs, train_s}``, where
    ``epochs`` counts the training epochs done at the first validation at or above ``target`` and ``train_s`` is
    their training time (evaluation excluded, as in ``epoch_time_s``); ``epochs`` and ``train_s`` are ``None`` when
    the run never reached it. ``None`` without a target (``evaluation.target_metric``)."""
    if target is None:
        return None
    epochs = epochs_to_target(valid_curve, target)
    if epochs is None or epochs > len(epoch_times):
        return {"target": target, "reached": False, "epochs": None, "train_s": None}
    return {"target": target, "reached": True, "epochs": epochs,
            "train_s": sum(_check_seconds(t) for t in epoch_times[:epochs])}


def cost_summary(profile_name: str, hourly_override: float | None, wall_time_s: float,
                 epoch_times: Sequence[float], valid_curve: Iterable[tuple[int, float | None]],
                 target: float | None) -> dict[str, Any]:
    """The ``cost_usd`` section of ``summary.json``.

    Args:
        profile_name: the registered profile (``machine.profile``).
        hourly_override: ``machine.hourly_usd`` (prices ``local``, overrides any other).
        wall_time_s: wall time of the whole run (setup, training, evaluation), priced as ``run``.
        epoch_times: wall time of every training epoch.
        valid_curve: ``(epoch, metric)`` of every validation (epochs numbered from 0).
        target: ``evaluation.target_metric``.

    Returns:
        ``{profile, hourly_usd, price_source, price_date, run, per_epoch, to_target, target, epochs_to_target}``;
        dollar amounts are ``None`` when no price is known. ``price_source`` says ``"machine.hourly_usd"`` when
        the spec's price was used.
    """
    profile = get_profile(profile_name)
    valid_curve = list(valid_curve)
    price = hourly_price(profile, hourly_override)
    return {
        "profile": profile.name,
        "hourly_usd": price,
        "price_source": "machine.hourly_usd" if hourly_override is not None else profile.price_source,
        "price_date": None if hourly_override is not None else (profile.price_date or None),
        "run": run_cost_usd(profile, wall_time_s, price),
        "per_epoch": cost_per_epoch(profile, epoch_times, price),
        "to_target": cost_to_target(profile, epoch_times, valid_curve, target, price),
        "target": target,
        "epochs_to_target": None if target is None else epochs_to_target(valid_curve, target),
    }


__all__ = [
    "AWS_PROFILES", "CPU_PROFILES", "MachineProfile", "cost_per_epoch", "cost_summary", "cost_to_target",
    "epochs_to_target", "get_profile", "hourly_price", "register_profile", "run_cost_usd", "time_to_target",
]
