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
# # Sampling: DENSE vs the naive layer-wise sampler
#
# The naive sampler (DGL semantics) samples every frontier node's neighbours at every hop, even when it sampled
# them at an earlier hop; DENSE (`systems/sampling/dense.py`) samples each node's neighbours once per batch and
# reuses them at every layer. Here both sample the same roots of a generated power-law graph: time per batch,
# sampled edges and unique nodes per hop, for 1 to `len(FANOUTS)` layers. The recorded reference table
# (`results/sampling.csv`, from `python -m experiments.figures.sampling` on much bigger graphs) follows if present.

# %% tags=["parameters"]
NUM_NODES = 20_000
AVG_DEGREE = 12.0
POWER_LAW_EXPONENT = 2.5
FANOUTS = [15, 10, 5]
BATCH_SIZE = 512
REPEATS = 5                 # timed batches per configuration (median reported)
REPLACE = False
SEED = 0
RESULTS_CSV = None          # the recorded table (None: <repo>/results/sampling.csv; skipped if missing)

# %%
import json
from pathlib import Path

import suite

ROOT = Path(suite.__file__).resolve().parents[1]  # the repository (editable install)
import statistics
import tempfile
import time

import pandas as pd
import torch
import matplotlib.pyplot as plt
from IPython.display import display

from suite.data.synthetic import SyntheticConfig, generate
from suite.registry import SAMPLERS
from systems.sampling.sampler import SamplingGraph

RESULTS_CSV = Path(RESULTS_CSV) if RESULTS_CSV else ROOT / "results" / "sampling.csv"
pd.set_option("display.width", 160)

# %%
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
print(f"graph: {NUM_NODES:,} nodes, {num_edges:,} stored edges; {len(roots)} roots")

# %%
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
            stats.append(sampler.counts(sample))
        hops = [round(statistics.median(s.unique_nodes_per_hop[i] for s in stats))
                for i in range(len(stats[0].unique_nodes_per_hop))]
        rows.append({"layers": layers, "sampler": name, "time_ms": 1e3 * statistics.median(times),
                     "sampled_edges": round(statistics.median(s.sampled_edges for s in stats)),
                     "one_hop_calls": round(statistics.median(s.one_hop_calls for s in stats)),
                     "unique_nodes_per_hop": hops, "total_nodes": sum(hops)})
table = pd.DataFrame(rows)
table

# %%
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
ratios.round(3)

# %% [markdown]
# ## The recorded reference table
#
# `results/sampling.csv` (naive vs DENSE on `livejournal-like` and `papers-like-s`; see `experiments/figures/sampling.py`
# for what every column means). Skipped when the file is not there.

# %%
recorded = None
if RESULTS_CSV.exists():
    recorded = pd.read_csv(RESULTS_CSV)
    ok = recorded[recorded["status"] == "ok"]
    display(ok.pivot_table(index=["dataset", "layers"], columns="sampler",
                           values=["time_s", "sampled_edges"]).round(4))
else:
    print(f"{RESULTS_CSV} not found: run python -m experiments.figures.sampling")

# %%
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
print("SUMMARY", json.dumps(summary))
