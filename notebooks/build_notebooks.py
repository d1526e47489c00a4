"""Write the suite's notebooks (``notebooks/*.ipynb``) from the cell sources below, without outputs.

The notebooks are generated, not edited by hand, so that what is committed is reproducible and clean: no
outputs, no execution counts, deterministic cell ids. Edit the cells here and run::

    python notebooks/build_notebooks.py          # rewrite every notebook
    python notebooks/build_notebooks.py --check  # exit 1 if a committed notebook differs from its source here

Every notebook has a ``parameters`` cell (papermill's tag): small inputs by default, which a user can point at
bigger data (``papermill notebooks/sampling.ipynb out.ipynb -p NUM_NODES 1000000``, or by editing the cell).
Each one ends with a cell that checks its results and prints one line ``SUMMARY {json}``, which
``tests/notebooks/test_notebooks.py`` reads after executing the notebook with nbclient.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent

# A cell is ("markdown" | "code" | "parameters", source).
Cell = tuple[str, str]

PATHS = '''\
import json
from pathlib import Path

import suite

ROOT = Path(suite.__file__).resolve().parents[1]  # the repository (editable install)
'''

# ---------------------------------------------------------------------------------------------- partition policies
PARTITION_POLICIES: list[Cell] = [
    ("markdown", """\
# Partition-buffer policies: swaps, IO and accuracy

A disk-based system keeps `c` of the graph's `p` node partitions in memory and walks a sequence of buffer states
(the policy's *plan*, `systems/disk/policies.py`). This notebook compares the policies three ways:

1. **swaps** (partitions read after the initial fill) of BETA's plans against its closed form and the lower bound
   of any ordering, over `p` and `c`; COMET's swaps at a fine-to-coarse ratio `r`;
2. **IO per epoch** from the buffer simulator (`simulators/buffer.py`) for `beta`, `comet`, `random`, `sequential`
   and `dispersed` on a graph of the size set below (node classification, features read from disk);
3. **a small real run per policy** with the disk system on the `tiny` synthetic graph: test accuracy and the IO it
   measured (bytes the suite read, bytes `/proc/self/io` says came from storage, time waiting for the buffer).

The defaults run in well under a minute; set the parameters for bigger graphs."""),
    ("parameters", """\
# Swaps over p and c (plans are generated for every pair with c < p).
P_VALUES = [8, 16, 32, 64, 128, 256]
C_VALUES = [2, 4, 8, 16]
COMET_RATIO = 2            # COMET's physical partitions per logical partition in the swap table

# Buffer simulator: node classification on a graph of this size (features on disk, train-first node order).
SIM_P = 256
SIM_C = 32
SIM_RATIO = 4              # comet / dispersed fine-to-coarse ratio
SIM_C_VALUES = [8, 16, 32, 64, 128]
SIM_NUM_NODES = 10_000_000
SIM_AVG_DEGREE = 20
SIM_FEATURE_DIM = 128
SIM_TRAIN_FRACTION = 0.05
SIM_READ_GBPS = 3.0
SIM_NODES_PER_S = 50_000   # training nodes per second of compute

# Real disk runs (system "disk") on a synthetic preset.
PRESET = "tiny"
REAL_POLICIES = {
    "in_memory": {"num_partitions": 4, "buffer_capacity": 4},
    "sequential": {"num_partitions": 8, "buffer_capacity": 4},
    "dispersed": {"num_partitions": 8, "buffer_capacity": 4, "fine_to_coarse_ratio": 2},
    "beta": {"num_partitions": 8, "buffer_capacity": 4},
    "comet": {"num_partitions": 8, "buffer_capacity": 4, "fine_to_coarse_ratio": 2},
    "random": {"num_partitions": 8, "buffer_capacity": 4},
}
REAL_EPOCHS = 2
SEED = 0
CACHE_DIR = None           # dataset cache (None: <repo>/data)
OUT_DIR = None             # run folders (None: <repo>/out/notebooks/partition_policies)"""),
    ("code", PATHS + '''\
import numpy as np
import pandas as pd
import matplotlib.pyplot as plt

from simulators.buffer import DiskModel, simulate
from suite.errors import ConfigError
from systems.disk.policies import PolicySpec, beta_swaps, make_plan, swap_lower_bound

CACHE_DIR = Path(CACHE_DIR) if CACHE_DIR else ROOT / "data"
OUT_DIR = Path(OUT_DIR) if OUT_DIR else ROOT / "out" / "notebooks" / "partition_policies"
pd.set_option("display.width", 160)'''),
    ("markdown", """\
## 1. Swaps over p and c

BETA: `(p-c) + (x+1)((p-c) - x(c-1)/2)` with `x = floor((p-c)/(c-1))`; any ordering that brings every pair of
partitions together needs at least `ceil((p(p-1)/2 - c(c-1)/2)/(c-1))`. The plan's own count (`plan.swaps`)
must equal the formula. COMET runs BETA over `p/r` logical partitions with `c/r` slots, reading `r` physical
partitions per logical swap."""),
    ("code", '''\
rows = []
for p in P_VALUES:
    for c in C_VALUES:
        if c >= p:
            continue
        spec = PolicySpec(p, c)
        beta = make_plan("beta", spec, seed=SEED)
        row = {"p": p, "c": c, "beta_plan": beta.swaps, "beta_formula": beta_swaps(p, c),
               "lower_bound": swap_lower_bound(p, c), "beta_states": beta.num_states}
        if p % COMET_RATIO == 0 and c % COMET_RATIO == 0 and c // COMET_RATIO >= 2:
            comet = make_plan("comet", PolicySpec(p, c, fine_to_coarse_ratio=COMET_RATIO), seed=SEED)
            row["comet_plan"] = comet.swaps
        rows.append(row)
swaps = pd.DataFrame(rows)
swaps["beta_over_bound"] = swaps["beta_plan"] / swaps["lower_bound"]
assert (swaps["beta_plan"] == swaps["beta_formula"]).all(), "a BETA plan disagrees with the closed form"
assert (swaps["beta_plan"] >= swaps["lower_bound"]).all()
swaps'''),
    ("code", '''\
fig, ax = plt.subplots(figsize=(7, 4))
for c, group in swaps.groupby("c"):
    line, = ax.plot(group["p"], group["beta_plan"], marker="o", label=f"BETA c={c}")
    ax.plot(group["p"], group["lower_bound"], ls=":", color=line.get_color())
ax.set(xscale="log", yscale="log", xlabel="partitions p", ylabel="swaps per epoch",
       title="BETA swaps (solid) vs the lower bound (dotted)")
ax.legend(fontsize=8)
plt.show()'''),
    ("markdown", """\
## 2. IO per epoch from the buffer simulator

Node classification with features on disk: every partition holds `SIM_NUM_NODES / p` rows of
`SIM_FEATURE_DIM` float32 values; training nodes come first (train-first order), so they fill the first
partitions. Edge buckets of the in-buffer subgraph are read as partitions enter (`edge_reads="resident"`).
`sequential` keeps the training partitions resident and needs one state; the others visit the whole graph."""),
    ("code", '''\
def node_spec(p, c, ratio=1):
    """A node-classification PolicySpec with a train-first layout of SIM_NUM_NODES nodes."""
    num_train = int(SIM_NUM_NODES * SIM_TRAIN_FRACTION)
    rows_per_partition = SIM_NUM_NODES / p
    train_partitions = (np.arange(num_train) // rows_per_partition).astype(np.int64)
    return PolicySpec(p, c, task="node_classification", fine_to_coarse_ratio=ratio,
                      train_partitions=train_partitions)


def disk_model(p):
    return DiskModel(partition_bytes=SIM_NUM_NODES / p * SIM_FEATURE_DIM * 4, learnable=False,
                     bucket_edges=SIM_NUM_NODES * SIM_AVG_DEGREE / (p * p), edge_bytes=24, edge_reads="resident",
                     read_bandwidth=SIM_READ_GBPS * 1e9, compute_per_example_s=1 / SIM_NODES_PER_S)


SIM_POLICIES = ["beta", "comet", "random", "sequential", "dispersed"]


def simulate_policies(p, c):
    rows = []
    for name in SIM_POLICIES:
        ratio = SIM_RATIO if name in ("comet", "dispersed") else 1
        if c % ratio or c // ratio < 2:
            continue
        try:
            plan = make_plan(name, node_spec(p, c, ratio), seed=SEED)
        except ConfigError as err:  # e.g. sequential: the training partitions do not fit in c slots
            print(f"p={p}, c={c}: {name} skipped ({err})")
            continue
        result = simulate(plan, disk_model(p)).as_dict()
        rows.append({**result, "fine_to_coarse_ratio": ratio})
    return pd.DataFrame(rows)


io = simulate_policies(SIM_P, SIM_C)
io["read_GB"] = io["bytes_read"] / 1e9
io["partition_GB"] = (io["fill_bytes"] + io["swap_read_bytes"]) / 1e9
io["edge_GB"] = io["edge_bytes"] / 1e9
io[["policy", "num_states", "swaps", "partitions_loaded", "partition_GB", "edge_GB", "read_GB",
    "epoch_time_serial_s", "epoch_time_prefetch_s"]]'''),
    ("code", '''\
over_c = pd.concat([simulate_policies(SIM_P, c) for c in SIM_C_VALUES if c < SIM_P], ignore_index=True)
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
for name, group in over_c.groupby("policy"):
    axes[0].plot(group["capacity"], group["bytes_read"] / 1e9, marker="o", label=name)
    axes[1].plot(group["capacity"], group["epoch_time_prefetch_s"], marker="o", label=name)
axes[0].set(xscale="log", yscale="log", xlabel="buffer capacity c", ylabel="GB read per epoch",
            title=f"IO per epoch, p={SIM_P}")
axes[1].set(xscale="log", yscale="log", xlabel="buffer capacity c", ylabel="seconds",
            title="epoch time with prefetch (simulated)")
axes[0].legend(fontsize=8)
plt.show()'''),
    ("markdown", """\
## 3. Real disk runs: accuracy and measured IO

One run of the `disk` system per policy (GraphSAGE, 2 layers) on the `PRESET` graph. `io_read_bytes` counts the
feature partitions and edge buckets the system read; `disk_read_bytes` is what the kernel reports as read from
storage (the page cache is evicted for every range read); `io_wait_s` is time the compute waited for the buffer.
The plan each epoch executed is rebuilt here from `(policy, p, c, seed, epoch)`: its swaps must equal the
measured ones. On a graph this small accuracy differences are mostly noise; the pattern of the paper (BETA's
correlated batches lose accuracy, COMET recovers it) needs a bigger graph (set `PRESET`, e.g. `arxiv-like`)."""),
    ("code", '''\
# One grid: a zip axis gives every policy its name and buffer options; suite.run_grid skips finished runs.
grid = {
    "base": {
        "dataset": {"name": "synthetic", "preset": PRESET, "cache_dir": str(CACHE_DIR)},
        "model": {"encoder": "graphsage", "num_layers": 2, "hidden_dim": 32, "fanouts": [10, 10]},
        "system": {"name": "disk", "device": "cpu"},
        "training": {"batch_size": 32, "epochs": REAL_EPOCHS, "learning_rate": 0.01},
        "evaluation": {"every": REAL_EPOCHS},
        "seed": SEED,
    },
    "zip": [{"name": [f"disk-{policy}" for policy in REAL_POLICIES],
             "system.options": [{"policy": policy, **options} for policy, options in REAL_POLICIES.items()]}],
}
grid_runs = suite.run_grid(grid, out=OUT_DIR)
assert all(run.status == "completed" for run in grid_runs), [run.summary for run in grid_runs]
run_ids = {run.run_id for run in grid_runs}
runs = suite.load_runs(OUT_DIR)
runs = runs[runs["run_id"].isin(run_ids)]
epochs = suite.load_epochs(OUT_DIR)
epochs = epochs[epochs["run_id"].isin(run_ids)]
per_policy = epochs.groupby("policy").agg(
    states=("states", "mean"), swaps=("swaps", "mean"), io_read_kB=("io_read_bytes", lambda b: b.mean() / 1e3),
    disk_read_kB=("disk_read_bytes", lambda b: b.mean() / 1e3), io_wait_s=("io_wait_s", "mean"),
    epoch_time_s=("epoch_time_s", "mean"))
accuracy = runs.set_index("config.system.options.policy")["metrics.test.accuracy"].rename("test_accuracy")
real = per_policy.join(accuracy).loc[list(REAL_POLICIES)]
real'''),
    ("code", '''\
from systems.disk.system import partitioned_store

# Rebuild each epoch's plan from the partitioned store the run used (cached beside the dataset), and check
# that the system executed it.
checked = 0
for policy, options in REAL_POLICIES.items():
    p, c = options["num_partitions"], options["buffer_capacity"]
    store = suite.open_dataset("synthetic", preset=PRESET, cache_dir=str(CACHE_DIR))
    pstore = partitioned_store(store, p, "train-first", SEED)
    offsets = pstore.array("partition_offsets")
    train = pstore.array("train_nodes")
    train_partitions = np.searchsorted(offsets, train, side="right") - 1
    spec = PolicySpec(p, c, task="node_classification", fine_to_coarse_ratio=options.get("fine_to_coarse_ratio", 1),
                      train_partitions=train_partitions)
    for _, row in epochs[epochs["policy"] == policy].iterrows():
        plan = make_plan(policy, spec, seed=SEED, epoch=int(row["epoch"]))
        assert plan.swaps == row["swaps"] and plan.num_states == row["states"], (policy, row["epoch"])
        checked += 1
print(f"{checked} epochs: measured swaps and states equal the rebuilt plans'")'''),
    ("code", '''\
fig, axes = plt.subplots(1, 2, figsize=(11, 3.5))
real["test_accuracy"].plot.bar(ax=axes[0], title=f"test accuracy ({PRESET}, {REAL_EPOCHS} epochs)")
real[["io_read_kB", "disk_read_kB"]].plot.bar(ax=axes[1], title="IO per epoch (kB)")
plt.tight_layout()
plt.show()'''),
    ("markdown", """\
**Reading the comparison.** The grid's runs are read back with `suite.load_runs` / `suite.load_epochs`, so the
table and the plots come from the recorded runs alone (running the grid cell again skips finished runs). Read the
IO columns against the plans: `states` and `swaps` are what each policy's plan prescribes (checked above), and
`io_read_kB` should grow with the swaps (a policy that keeps the training partitions resident, `sequential`,
reads only the rotating slots; `beta`, `comet` and `random` reload partitions within every epoch), while
`disk_read_kB` shows how much of it really came from storage. Accuracy from one seed of a tiny graph decides
nothing: compare policies over seeds (a grid axis `seed: [0, 1, 2]`) with the suite's intervals before reading a difference into it."""),
    ("code", '''\
summary = {
    "swap_rows": len(swaps),
    "beta_equals_formula": bool((swaps["beta_plan"] == swaps["beta_formula"]).all()),
    "sim_policies": sorted(io["policy"]),
    "sim_read_GB": {row.policy: round(row.read_GB, 3) for row in io.itertuples()},
    "real_policies": sorted(real.index),
    "real_accuracy": {k: round(float(v), 3) for k, v in real["test_accuracy"].items()},
    "plans_checked": checked,
}
assert summary["beta_equals_formula"] and checked == REAL_EPOCHS * len(REAL_POLICIES)
assert real["test_accuracy"].between(0, 1).all() and (real["io_read_kB"] > 0).all()
print("SUMMARY", json.dumps(summary))'''),
]

# ---------------------------------------------------------------------------------------------- pipeline what-if
PIPELINE_WHATIF: list[Cell] = [
    ("markdown", """\
# Pipeline what-if with the simulator

Calibrate the pipeline simulator (`simulators/pipeline.py`, `simulators/calibrate.py`) on a recorded *sync*
pipelined run (stages never overlap, so every measured service time is the stage's own work), check that it
reproduces that run, then predict epoch time, compute utilization and staleness

- over the number of loader workers and the staleness bound, on the recorded machine (CPU stages share its cores);
- on a what-if machine (`PROFILE`, default `p3.2xlarge`: compute priced from FLOPs on its GPU, transfers from PCIe
  bandwidth; every figure an assumption named in `simulators.calibrate.HARDWARE`).

By default the notebook records its own small sync run on the `tiny` preset; point `RUN_DIR` at a recorded
run folder (e.g. `out/pipeline/pipeline_speed/<run>` from `python experiments/pipeline.py`) to use that instead."""),
    ("parameters", """\
RUN_DIR = None               # a recorded pipelined run folder to calibrate on (None: record one on PRESET)
PRESET = "tiny"
RECORD_EPOCHS = 2
BATCH_SIZE = 16
LOADER_WORKERS = [1, 2, 4, 8]
STALENESS_BOUNDS = [1, 2, 4, 8, 16]
NUM_BATCHES = 200            # batches per simulated epoch (None: the calibration run's)
PROFILE = "p3.2xlarge"
SEED = 0
CACHE_DIR = None             # dataset cache (None: <repo>/data)
OUT_DIR = None               # recorded run (None: <repo>/out/notebooks/pipeline_whatif)"""),
    ("code", PATHS + '''\
import pandas as pd
import matplotlib.pyplot as plt

from simulators.calibrate import HARDWARE, calibrate, model_for, summary_of
from simulators.pipeline import simulate
from systems.pipelined import PipelineOptions

CACHE_DIR = Path(CACHE_DIR) if CACHE_DIR else ROOT / "data"
OUT_DIR = Path(OUT_DIR) if OUT_DIR else ROOT / "out" / "notebooks" / "pipeline_whatif"
pd.set_option("display.width", 160)'''),
    ("code", '''\
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
(services.describe().T * 1e3).round(3).rename(columns=lambda c: f"{c} (ms)" if c != "count (ms)" else "count")'''),
    ("markdown", """\
## Check: the simulator reproduces the recorded run

The sync schedule simulated with the calibrated service times, for the calibration run's own number of batches,
against the sum of the recorded stage times and the measured warm epoch. The simulator resamples the recorded
service times with replacement, so the ratio is close to 1, not exactly 1; the measured epoch also holds work
between batches that the stages do not record (the optimizer's bookkeeping, records)."""),
    ("code", '''\
sync = model_for(PipelineOptions(sync=True).effective(), calibration)
predicted_sync = summary_of(simulate(sync, calibration.num_batches, seed=SEED))
measured_epoch_s = float(recorded["epoch_time_s"][-1])
stage_sum_s = sum(sum(samples) for samples in calibration.services.values())
check = pd.Series({"measured warm epoch (s)": measured_epoch_s, "sum of recorded stage times (s)": stage_sum_s,
                   "simulated sync epoch (s)": predicted_sync["epoch_time_s"],
                   "simulated / stage sum": predicted_sync["epoch_time_s"] / stage_sum_s})
check'''),
    ("markdown", """\
## Loader workers x staleness bound, on the recorded machine and on the what-if machine"""),
    ("code", '''\
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
whatif.pivot_table(index=["machine", "loader_workers"], columns="staleness_bound", values="epoch_time_s").round(4)'''),
    ("code", '''\
whatif.pivot_table(index=["machine", "loader_workers"], columns="staleness_bound",
                   values="compute_utilization").round(3)'''),
    ("code", '''\
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
for (machine, workers), group in whatif.groupby(["machine", "loader_workers"]):
    style = "-" if machine == "recorded" else "--"
    axes[0].plot(group["staleness_bound"], group["epoch_time_s"], style, marker="o", label=f"{machine}, {workers} loaders")
    axes[1].plot(group["staleness_bound"], group["compute_utilization"], style, marker="o")
axes[0].set(xscale="log", yscale="log", xlabel="staleness bound", ylabel="simulated epoch time (s)",
            title=f"{num_batches} batches")
axes[1].set(xscale="log", xlabel="staleness bound", ylabel="compute utilization", ylim=(0, 1.05))
axes[0].legend(fontsize=7)
plt.show()
whatif.groupby("machine")["bottleneck_stage"].value_counts().unstack(fill_value=0)'''),
    ("code", '''\
best = whatif.loc[whatif.groupby("machine")["epoch_time_s"].idxmin()]
summary = {
    "calibration_batches": calibration.num_batches,
    "simulated_batches": num_batches,
    "configurations": int(len(whatif)),
    "machines": sorted(whatif["machine"].unique()),
    "sync_ratio": round(predicted_sync["epoch_time_s"] / stage_sum_s, 3),
    "best": {row.machine: {"loader_workers": int(row.loader_workers), "staleness_bound": int(row.staleness_bound),
                           "epoch_time_s": row.epoch_time_s} for row in best.itertuples()},
    "max_staleness_below_bound": bool((whatif["staleness_max"] < whatif["staleness_bound"]).all()),
}
assert summary["max_staleness_below_bound"] and (whatif["compute_utilization"] <= 1 + 1e-9).all()
print("SUMMARY", json.dumps(summary))'''),
]

# ---------------------------------------------------------------------------------------------- sampling
SAMPLING: list[Cell] = [
    ("markdown", """\
# Sampling: DENSE vs the naive layer-wise sampler

The naive sampler (DGL semantics) samples every frontier node's neighbours at every hop, even when it sampled
them at an earlier hop; DENSE (`systems/sampling/dense.py`) samples each node's neighbours once per batch and
reuses them at every layer. Here both sample the same roots of a generated power-law graph: time per batch,
sampled edges and unique nodes per hop, for 1 to `len(FANOUTS)` layers. The recorded reference table
(`results/sampling.csv`, from `python experiments/sampling.py` on much bigger graphs) follows if present."""),
    ("parameters", """\
NUM_NODES = 20_000
AVG_DEGREE = 12.0
POWER_LAW_EXPONENT = 2.5
FANOUTS = [15, 10, 5]
BATCH_SIZE = 512
REPEATS = 5                 # timed batches per configuration (median reported)
REPLACE = False
SEED = 0
RESULTS_CSV = None          # the recorded table (None: <repo>/results/sampling.csv; skipped if missing)"""),
    ("code", PATHS + '''\
import statistics
import tempfile
import time

import pandas as pd
import torch
import matplotlib.pyplot as plt
from IPython.display import display

import suite.plugins  # noqa: F401  (registers the samplers)
from experiments.sampling import dense_stats, naive_stats
from suite.graph.synthetic import SyntheticConfig, generate
from suite.registry import SAMPLERS
from systems.sampling.base import SamplingGraph

RESULTS_CSV = Path(RESULTS_CSV) if RESULTS_CSV else ROOT / "results" / "sampling.csv"
pd.set_option("display.width", 160)'''),
    ("code", '''\
config = SyntheticConfig(name="notebook-power-law", num_nodes=NUM_NODES, avg_degree=AVG_DEGREE,
                         power_law_exponent=POWER_LAW_EXPONENT, num_classes=4, feature_dim=0, label_rate=0.0,
                         seed=SEED)
with tempfile.TemporaryDirectory() as folder:
    store = generate(config, Path(folder) / "graph")
    csr = store.csr("in")
    graph = SamplingGraph(csr.indptr.to(torch.int64).clone(), csr.indices.to(torch.int64).clone())
    num_edges = int(store.num_edges)
del store, csr
roots = torch.randperm(NUM_NODES, generator=torch.Generator().manual_seed(SEED))[:BATCH_SIZE]
print(f"graph: {NUM_NODES:,} nodes, {num_edges:,} stored edges; {len(roots)} roots")'''),
    ("code", '''\
STATS = {"naive": naive_stats, "dense": dense_stats}
rows = []
for layers in range(1, len(FANOUTS) + 1):
    for name in ("naive", "dense"):
        sampler = SAMPLERS.get(name)(graph, tuple(FANOUTS[:layers]), replace=REPLACE)
        generator = torch.Generator().manual_seed(SEED)
        sampler.sample(roots, generator)  # warm-up: JIT compilation, first allocations
        times, stats = [], []
        for _ in range(REPEATS):
            started = time.perf_counter()
            sample = sampler.sample(roots, generator)
            times.append(time.perf_counter() - started)
            stats.append(STATS[name](sample))
        hops = [round(statistics.median(s.unique_nodes_per_hop[i] for s in stats))
                for i in range(len(stats[0].unique_nodes_per_hop))]
        rows.append({"layers": layers, "sampler": name, "time_ms": 1e3 * statistics.median(times),
                     "sampled_edges": round(statistics.median(s.sampled_edges for s in stats)),
                     "one_hop_calls": round(statistics.median(s.one_hop_calls for s in stats)),
                     "unique_nodes_per_hop": hops, "total_nodes": sum(hops)})
table = pd.DataFrame(rows)
table'''),
    ("code", '''\
wide = table.pivot(index="layers", columns="sampler", values=["time_ms", "sampled_edges", "one_hop_calls"])
ratios = pd.DataFrame({"time naive/dense": wide["time_ms"]["naive"] / wide["time_ms"]["dense"],
                       "edges naive/dense": wide["sampled_edges"]["naive"] / wide["sampled_edges"]["dense"],
                       "one-hop calls naive/dense": wide["one_hop_calls"]["naive"] / wide["one_hop_calls"]["dense"]})
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
wide["time_ms"].plot(ax=axes[0], marker="o", title="time per batch (ms)", logy=True)
wide["sampled_edges"].plot(ax=axes[1], marker="o", title="sampled edges per batch", logy=True)
for ax in axes:
    ax.set_xticks(range(1, len(FANOUTS) + 1))
plt.show()
ratios.round(3)'''),
    ("markdown", """\
## The recorded reference table

`results/sampling.csv` (naive vs DENSE on `livejournal-like` and `papers-like-s`; see `experiments/sampling.py`
for what every column means). Skipped when the file is not there."""),
    ("code", '''\
recorded = None
if RESULTS_CSV.exists():
    recorded = pd.read_csv(RESULTS_CSV)
    ok = recorded[recorded["status"] == "ok"]
    display(ok.pivot_table(index=["dataset", "layers"], columns="sampler",
                           values=["time_s", "sampled_edges"]).round(4))
else:
    print(f"{RESULTS_CSV} not found: run python experiments/sampling.py")'''),
    ("code", '''\
summary = {
    "num_nodes": NUM_NODES,
    "layers": len(FANOUTS),
    "rows": int(len(table)),
    "edges_ratio": {int(k): round(float(v), 3) for k, v in ratios["edges naive/dense"].items()},
    "recorded_rows": 0 if recorded is None else int(len(recorded)),
}
# One hop: both samplers sample the roots' neighbours once; from two hops on DENSE never samples more.
assert ratios["edges naive/dense"].iloc[0] == 1.0 or REPLACE
assert (ratios["edges naive/dense"] >= 1.0 - 1e-9).all() and (table["sampled_edges"] > 0).all()
print("SUMMARY", json.dumps(summary))'''),
]

NOTEBOOKS: dict[str, list[Cell]] = {
    "partition_policies": PARTITION_POLICIES,
    "pipeline_whatif": PIPELINE_WHATIF,
    "sampling": SAMPLING,
}
"""Notebook name (file stem) -> its cells."""


def build(name: str, cells: list[Cell]) -> nbformat.NotebookNode:
    """The notebook ``name`` from ``cells``: no outputs, no execution counts, cell ids ``<name>-<index>``."""
    notebook = nbformat.v4.new_notebook()
    notebook.metadata = {
        "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    for index, (kind, source) in enumerate(cells):
        cell_id = f"{name.replace('_', '-')}-{index:02d}"
        if kind == "markdown":
            cell = nbformat.v4.new_markdown_cell(source, id=cell_id)
        else:
            cell = nbformat.v4.new_code_cell(source, id=cell_id)
            if kind == "parameters":
                cell.metadata["tags"] = ["parameters"]
        notebook.cells.append(cell)
    nbformat.validate(notebook)
    return notebook


def render(notebook: nbformat.NotebookNode) -> str:
    """The notebook as the JSON text committed to git (nbformat's layout, one trailing newline)."""
    return nbformat.writes(notebook) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write (or with ``--check`` compare) every notebook; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a notebook differs from its source here")
    parser.add_argument("--out", type=Path, default=HERE, help="folder to write to (default: %(default)s)")
    args = parser.parse_args(argv)
    stale = []
    for name, cells in NOTEBOOKS.items():
        path = args.out / f"{name}.ipynb"
        text = render(build(name, cells))
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(path)
        else:
            path.write_text(text)
            print(f"wrote {path}")
    if stale:
        print("out of date (run python notebooks/build_notebooks.py): " + ", ".join(map(str, stale)), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
