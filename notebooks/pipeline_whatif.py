# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Pipeline what-if with the simulator
#
# Calibrate the pipeline simulator (`simulators/pipeline_model.py`, `simulators/calibrate.py`) on a recorded *sync*
# pipelined run (stages never overlap, so every measured service time is the stage's own work), check that it
# reproduces that run, then predict epoch time, compute utilization and staleness
#
# - over the number of loader workers and the staleness bound, on the recorded machine (CPU stages share its cores);
# - on a what-if machine (`PROFILE`, default `p3.2xlarge`: compute priced from FLOPs on its GPU, transfers from PCIe
#   bandwidth; every figure an assumption named in `simulators.calibrate.HARDWARE`).
#
# By default the notebook records its own small sync run on the `tiny` preset; point `RUN_DIR` at a recorded run
# folder (e.g. `out/pipeline/pipeline_speed/<run>` from `python -m experiments.figures.pipeline_speed`) to use that
# instead.

# %% tags=["parameters"]
RUN_DIR = None               # a recorded pipelined run folder to calibrate on (None: record one on PRESET)
PRESET = "tiny"
RECORD_EPOCHS = 2
BATCH_SIZE = 16
LOADER_WORKERS = [1, 2, 4, 8]
STALENESS_BOUNDS = [1, 2, 4, 8, 16]
NUM_BATCHES = 200            # batches per simulated epoch (None: the calibration run's)
CHECK_BATCHES = 2000         # batches simulated for the check against the recorded run
PROFILE = "p3.2xlarge"
SEED = 0
CACHE_DIR = None             # dataset cache (None: <repo>/data)
OUT_DIR = None               # recorded run (None: <repo>/out/notebooks/pipeline_whatif)

# %%
import json
from pathlib import Path

import suite

ROOT = Path(suite.__file__).resolve().parents[1]  # the repository (editable install)
import pandas as pd
import matplotlib.pyplot as plt

from simulators.calibrate import HARDWARE, calibrate, model_for, summary_of
from simulators.pipeline_model import simulate
from systems.pipelined import PipelineOptions

CACHE_DIR = Path(CACHE_DIR) if CACHE_DIR else ROOT / "data"
OUT_DIR = Path(OUT_DIR) if OUT_DIR else ROOT / "out" / "notebooks" / "pipeline_whatif"
pd.set_option("display.width", 160)

# %%
if RUN_DIR is None:
    run = suite.run({
        "name": "whatif-sync",
        "dataset": {"name": "synthetic", "preset": PRESET, "cache_dir": str(CACHE_DIR)},
        "model": {"encoder": "graphsage", "num_layers": 2, "hidden_dim": 16, "fanouts": [5, 5]},
        "system": {"name": "pipelined", "device": "cpu", "options": {"sync": True}},
        "training": {"batch_size": BATCH_SIZE, "epochs": RECORD_EPOCHS},
        "evaluation": {"splits": []},
        "seed": SEED,
    }, out=OUT_DIR)
    assert run.status == "completed", run.summary
    RUN_DIR = run.run_dir
RUN_DIR = Path(RUN_DIR)
recorded = json.loads((RUN_DIR / "summary.json").read_text())
calibration = calibrate(RUN_DIR)
feature_dim = int(recorded["dataset_info"]["feature_dim"])
num_batches = NUM_BATCHES or calibration.num_batches
services = pd.DataFrame({stage: pd.Series(samples) for stage, samples in calibration.services.items()})
print(f"calibrated on {RUN_DIR.name}: {calibration.num_batches} batches, {calibration.cpu_cores:g} cores, "
      f"feature dim {feature_dim}")
(services.describe().T * 1e3).round(3).rename(columns=lambda c: f"{c} (ms)" if c != "count (ms)" else "count")

# %% [markdown]
# ## Check: the simulator reproduces the recorded run
#
# The sync schedule simulated with the calibrated service times against what the recorded batches spent, per batch:
# their stage times plus the hand-offs between stages (the gaps a sync batch waits; on a loaded machine they are a
# large share). The calibration holds every epoch's batches but the first few, more than the warm epoch's
# `num_batches`. The simulator resamples the recorded service times and hand-offs with replacement, so it runs
# `CHECK_BATCHES` batches to average that out: the ratio is close to 1. The measured epoch holds a little more, work
# between batches that no stage records (the optimizer's bookkeeping).

# %%
sync = model_for(PipelineOptions(sync=True).effective(), calibration)
check_batches = max(CHECK_BATCHES, calibration.num_batches)
simulated_per_batch_s = summary_of(simulate(sync, check_batches, seed=SEED))["epoch_time_s"] / check_batches
measured_epoch_s = float(recorded["epoch_time_s"][-1])
stage_sum_s = sum(sum(samples) for samples in calibration.services.values())
handoff_sum_s = sum(sum(gaps) for gaps in calibration.handoffs.values())
recorded_batches = len(next(iter(calibration.services.values())))  # every epoch's past the warm-up
recorded_per_batch_s = (stage_sum_s + handoff_sum_s) / recorded_batches
check = pd.Series({"measured warm epoch (s)": measured_epoch_s, "sum of recorded stage times (s)": stage_sum_s,
                   "sum of recorded hand-offs (s)": handoff_sum_s,
                   "simulated sync epoch (s)": simulated_per_batch_s * calibration.num_batches,
                   "simulated / recorded (stages + hand-offs), per batch":
                       simulated_per_batch_s / recorded_per_batch_s})
check


# %% [markdown]
# ## Loader workers x staleness bound, on the recorded machine and on the what-if machine

# %%
def grid(hardware=None):
    rows = []
    for workers in LOADER_WORKERS:
        for bound in STALENESS_BOUNDS:
            options = PipelineOptions(batch_loader_threads=workers, staleness_bound=bound).effective()
            model = model_for(options, calibration, hardware, feature_dim=feature_dim)
            result = summary_of(simulate(model, num_batches, seed=SEED))
            rows.append({"machine": hardware.name if hardware else "recorded", "loader_workers": workers,
                         "staleness_bound": bound, **result})
    return pd.DataFrame(rows)


whatif = pd.concat([grid(), grid(HARDWARE[PROFILE])], ignore_index=True)
sync_epoch_s = summary_of(simulate(sync, num_batches, seed=SEED))["epoch_time_s"]
whatif["speedup_vs_sync"] = sync_epoch_s / whatif["epoch_time_s"]
whatif.pivot_table(index=["machine", "loader_workers"], columns="staleness_bound", values="epoch_time_s").round(4)

# %%
whatif.pivot_table(index=["machine", "loader_workers"], columns="staleness_bound",
                   values="compute_utilization").round(3)

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
for (machine, workers), group in whatif.groupby(["machine", "loader_workers"]):
    style = "-" if machine == "recorded" else "--"
    axes[0].plot(group["staleness_bound"], group["epoch_time_s"], style, marker="o",
                 label=f"{machine}, {workers} loaders")
    axes[1].plot(group["staleness_bound"], group["compute_utilization"], style, marker="o")
axes[0].set(xscale="log", yscale="log", xlabel="staleness bound", ylabel="simulated epoch time (s)",
            title=f"{num_batches} batches")
axes[1].set(xscale="log", xlabel="staleness bound", ylabel="compute utilization", ylim=(0, 1.05))
axes[0].legend(fontsize=7)
plt.show()
whatif.groupby("machine")["bottleneck_stage"].value_counts().unstack(fill_value=0)

# %%
best = whatif.loc[whatif.groupby("machine")["epoch_time_s"].idxmin()]
summary = {
    "calibration_batches": calibration.num_batches,
    "simulated_batches": num_batches,
    "configurations": int(len(whatif)),
    "machines": sorted(whatif["machine"].unique()),
    "sync_ratio": round(simulated_per_batch_s / recorded_per_batch_s, 3),
    "best": {row.machine: {"loader_workers": int(row.loader_workers), "staleness_bound": int(row.staleness_bound),
                           "epoch_time_s": row.epoch_time_s} for row in best.itertuples()},
    "max_staleness_below_bound": bool((whatif["staleness_max"] < whatif["staleness_bound"]).all()),
}
assert summary["max_staleness_below_bound"] and (whatif["compute_utilization"] <= 1 + 1e-9).all()
print("SUMMARY", json.dumps(summary))
