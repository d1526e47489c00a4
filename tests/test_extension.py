"""The README's recipes for extending the suite, followed as written: in a copy of the code, a toy partition-buffer
policy, sampler, figure and peer (``tests/extension_toys/``) are each added as the README says (one module at the
path it names, one line in the table it names, nothing else), and each runs end to end from the command line:

- the policy trains disk-based link prediction and is priced by the buffer simulator;
- the sampler trains node classification and appears in the sampling figure's table and drawing;
- the figure is reproduced (``gnnsuite reproduce --only``), its claim decided in REPORT.md, and compared;
- the peer trains (it draws random embeddings) in the link-prediction peers experiment, ranked by the suite.

``lint-imports`` then keeps every contract of the copy: the new figure job is covered by the figure jobs'
independence contract without an edit.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from tests.support.paths import REPO_ROOT

TOYS_DIR = Path(__file__).parent / "extension_toys"
PACKAGES = ("suite", "systems", "simulators", "experiments")


@dataclass(frozen=True)
class Toy:
    """One extension: the README bullet that explains it, the name it is registered under, its source file in
    ``tests/extension_toys`` and the attribute its table line names."""

    bullet: str
    name: str
    source: str
    attribute: str


TOYS = (
    Toy("A partition-buffer policy", "ordered_pairs", "ordered_pairs.py", "OrderedPairsPolicy"),
    Toy("A sampler", "with_replacement", "with_replacement.py", "WithReplacementSampler"),
    Toy("A figure", "policy_swaps", "policy_swaps.py", "FIGURE"),
    Toy("A peer", "random_embeddings", "random_embeddings.py", "PEER"),
)


@dataclass(frozen=True)
class Recipe:
    """What a README bullet says to write: a module at ``module`` (with ``<name>``) and one line in ``table`` of
    ``table_file``."""

    module: str
    table: str
    table_file: str


def readme_recipe(bullet: str) -> Recipe:
    """The recipe of the README's Architecture bullet ``**<bullet>**: a module `PATH` ... one line in the `TABLE`
    table of `FILE` ...``."""
    text = " ".join((REPO_ROOT / "README.md").read_text().split())
    match = re.search(rf"\*\*{re.escape(bullet)}\*\*: a module `([^`]+)`.*? one line in the `(\w+)` table of "
                      r"`([^`]+)`", text)
    assert match, f"README.md has no recipe for {bullet!r} in the form the test follows"
    return Recipe(*match.groups())


def add_table_line(path: Path, table: str, name: str, target: str) -> None:
    """Insert ``"name": "target",`` as the first line of the dict literal ``TABLE = {`` in ``path``."""
    lines = path.read_text().splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if re.match(rf"{table}(: [^=]+)? = \{{\s*$", line)]
    assert len(starts) == 1, f"{path}: expected one '{table} = {{' line, found {len(starts)}"
    lines.insert(starts[0] + 1, f'    "{name}": "{target}",\n')
    path.write_text("".join(lines))


@pytest.fixture(scope="module")
def house(tmp_path_factory) -> Path:
    """A copy of the code with the four toys added as the README says."""
    root = tmp_path_factory.mktemp("house")
    for package in PACKAGES:
        shutil.copytree(REPO_ROOT / package, root / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO_ROOT / "pyproject.toml", root / "pyproject.toml")
    for toy in TOYS:
        recipe = readme_recipe(toy.bullet)
        module_path = recipe.module.replace("<name>", toy.name)
        assert not (root / module_path).exists()
        shutil.copy(TOYS_DIR / toy.source, root / module_path)
        module = module_path.removesuffix(".py").replace("/", ".")
        add_table_line(root / recipe.table_file, recipe.table, toy.name, f"{module}:{toy.attribute}")
    return root


def run_in(house: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """``python ARGS`` in the copy (its packages first on the path); fails the test with the output if it fails."""
    env = {**os.environ, "PYTHONPATH": str(house), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, *args], cwd=house, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, f"{' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _files(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for package in PACKAGES
            for path in (root / package).rglob("*") if path.is_file() and "__pycache__" not in path.parts}


def test_each_toy_is_one_module_and_one_table_line(house):
    original, copy = _files(REPO_ROOT), _files(house)
    added = sorted(set(copy) - set(original))
    changed = sorted(name for name in set(copy) & set(original) if copy[name] != original[name])
    assert added == sorted(readme_recipe(toy.bullet).module.replace("<name>", toy.name) for toy in TOYS)
    assert changed == ["experiments/plugins.py", "systems/plugins.py"] and set(original) <= set(copy)
    for table_file in changed:
        before, after = original[table_file].decode().splitlines(), copy[table_file].decode().splitlines()
        assert len(after) - len(before) == 2 and all(line in after for line in before)


def test_the_copy_keeps_every_import_contract(house):
    lint = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    env = {**os.environ, "PYTHONPATH": str(house)}
    done = subprocess.run([lint], cwd=house, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and " 0 broken" in done.stdout, done.stdout[-2000:]


def test_toy_policy_trains_from_disk_and_is_simulated(house, tmp_path):
    out = tmp_path / "runs"
    run_in(house, "-m", "suite", "run", str(REPO_ROOT / "experiments/specs/link_prediction_synthetic.yaml"),
           "--set", "dataset.params.num_nodes=2000", "--set", f"dataset.cache_dir={tmp_path / 'data'}",
           "--set", "training.epochs=1", "--set", "system.name=disk",
           "--set", "system.options={policy: ordered_pairs, num_partitions: 8, buffer_capacity: 4}",
           "--out", str(out))
    (summary_path,) = out.glob("*/summary.json")
    summary = json.loads(summary_path.read_text())
    assert summary["status"] == "completed" and summary["metrics"]["test"]["mrr"] > 0
    epochs = [json.loads(line) for line in (summary_path.parent / "records.jsonl").read_text().splitlines()]
    states = [record["states"] for record in epochs if record.get("kind") == "epoch" and "states" in record]
    assert states == [6]  # 4 groups of 2 partitions: every pair of groups is one state
    simulated = run_in(house, "-m", "simulators.buffer_model", "--policy", "ordered_pairs", "beta", "-p", "8",
                       "-c", "4", "--json")
    rows = {row["policy"]: row for row in json.loads(simulated.stdout)}
    assert rows["ordered_pairs"]["num_states"] == 6 and rows["beta"]["num_states"] > 0


def test_toy_sampler_trains_and_appears_in_the_sampling_figure(house, tmp_path):
    out = tmp_path / "runs"
    run_in(house, "-m", "suite", "run", str(REPO_ROOT / "experiments/specs/quickstart.yaml"), "--set",
           "dataset.preset=tiny", "--set", f"dataset.cache_dir={tmp_path / 'data'}", "--set", "training.epochs=1",
           "--set", "sampler.name=with_replacement", "--out", str(out))
    (summary_path,) = out.glob("*/summary.json")
    assert json.loads(summary_path.read_text())["status"] == "completed"
    csv, png = tmp_path / "sampling.csv", tmp_path / "sampling.png"
    run_in(house, "-m", "experiments.figures.sampling", "--num-nodes", "2000", "--settings", "papers", "--layers", "1",
           "--repeats", "1", "--warmup", "0", "--threads", "1", "--data-dir", str(tmp_path / "data"), "--csv",
           str(csv), "--png", str(png))
    toy = pd.read_csv(csv).set_index("sampler").loc["with_replacement"]
    assert toy["status"] == "ok" and png.stat().st_size > 0


def test_toy_figure_is_reproduced_reported_and_compared(house, tmp_path):
    out = tmp_path / "reproduce"
    run_in(house, "-m", "suite", "reproduce", "--quick", "--only", "policy_swaps", "--out", str(out))
    table = pd.read_csv(out / "results" / "policy_swaps.csv")
    assert {"beta", "comet", "random", "ordered_pairs"} <= set(table["policy"])  # the toy policy, by registration
    assert (out / "results" / "policy_swaps.png").stat().st_size > 0
    report = (out / "results" / "REPORT.md").read_text()
    assert re.search(r"policy-swaps-bound.*holds", report)
    compared = run_in(house, "-m", "suite", "report", str(out), "--against", str(out))
    assert "policy-swaps-bound" in compared.stdout


def test_toy_peer_runs_in_the_peers_experiment(house, tmp_path, shared_datasets):
    run_in(house, "-m", "experiments.figures.link_prediction_peers", "--quick", "--out", str(tmp_path / "runs"),
           "--results", str(tmp_path), "--data-dir", str(tmp_path / "data"), "--dataset-root",
           str(shared_datasets / "fb15k237"), "--configurations", "random-embeddings")
    row = pd.read_csv(tmp_path / "link_prediction_peers.csv").set_index("configuration").loc["random-embeddings"]
    assert row["status"] == "ok" and 0.0 < row["test_mrr"] < 0.05
