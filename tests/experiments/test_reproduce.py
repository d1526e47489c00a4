"""``gnnsuite reproduce`` into a fresh folder, the reference left alone, ``--update-reference``, REPORT.md claims
decided from intervals, and ``gnnsuite report DIR --against REF``."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from experiments import compare, report, reproduce
from experiments.plugins import FIGURES
from suite.cli import main as gnnsuite
from suite.errors import ConfigError
from suite.stats import Interval


def test_jobs_are_registered_in_order_and_selectable():
    names = [job.name for job in reproduce.plan(None)]
    assert names[:3] == ["sampling", "pipeline", "pipeline_validation"]
    assert [job.name for job in reproduce.plan(["pipeline", "sampling"])] == ["sampling", "pipeline"]
    with pytest.raises(ConfigError, match="--only: unknown figure 'nope'"):
        reproduce.plan(["nope"])
    with pytest.raises(ConfigError, match="mode"):
        reproduce.reproduce("medium")


def test_every_job_calls_a_typed_run_of_its_module():
    """Each job's experiment exposes ``run(*, ...)``: keyword-only, every parameter and the result annotated, and a
    ``mode`` among the common modes where the experiment has modes (cost and disk_simulation have none: they read
    the other jobs' runs)."""
    import importlib
    import inspect
    import typing

    from experiments.common import MODES

    for item in reproduce.plan(None):
        module = importlib.import_module(item.experiment)
        signature = inspect.signature(module.run)
        hints = typing.get_type_hints(module.run)
        assert signature.parameters, item.name
        for name, parameter in signature.parameters.items():
            assert parameter.kind is inspect.Parameter.KEYWORD_ONLY, f"{item.experiment}.run: {name} is positional"
            assert name in hints, f"{item.experiment}.run: {name} has no type"
        assert "return" in hints, f"{item.experiment}.run: no return type"
        if "mode" in signature.parameters:
            assert set(MODES) <= set(typing.get_args(hints["mode"])), item.name
        else:
            assert item.name in ("cost", "disk_simulation")
        assert callable(module.main) and "argv" in inspect.signature(module.main).parameters


@pytest.fixture()
def repo(tmp_path) -> Path:
    """A stand-in checkout: a committed reference ``results/`` with one file that must never change."""
    root = tmp_path / "repo"
    (root / "results").mkdir(parents=True)
    (root / "results" / "buffer_io.csv").write_text("reference\n")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "reference")
    return root


def _git(root: Path, *args: str) -> str:
    import subprocess

    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout.strip()


def test_one_job_goes_to_the_out_folder_and_never_to_the_reference(repo, tmp_path):
    out = tmp_path / "repro"
    times = reproduce.reproduce("quick", ["buffer_io"], out, data=tmp_path / "data", root=repo)
    assert set(times) == {"buffer_io"}
    for name in FIGURES.get("buffer_io").outputs:
        assert (out / "results" / name).stat().st_size > 0
    text = (out / "results" / "REPORT.md").read_text()
    assert "| dense-speedup |" in text and "**not testable here**" in text and "buffer_io.png" in text
    assert "sampling.csv missing (the job that writes it did not run)" in text
    assert str(tmp_path) not in text  # no machine's path in the report
    manifest = json.loads((out / reproduce.MANIFEST).read_text())
    assert manifest["mode"] == "quick" and manifest["status"] == "completed" and "buffer_io" in manifest["times_s"]
    assert sorted(p.name for p in (repo / "results").iterdir()) == ["buffer_io.csv"]
    assert (repo / "results" / "buffer_io.csv").read_text() == "reference\n"


def test_a_previous_reproduction_is_refused_unless_resumed_or_overwritten(repo, tmp_path):
    out = tmp_path / "repro"
    reproduce.reproduce("quick", ["buffer_io"], out, data=tmp_path / "data", root=repo)
    with pytest.raises(ConfigError, match="--out: .* already holds files .* --resume .* --overwrite"):
        reproduce.reproduce("quick", ["buffer_io"], out, data=tmp_path / "data", root=repo)
    (out / "results" / "stale.csv").write_text("x\n")
    reproduce.reproduce("quick", ["buffer_io"], out, data=tmp_path / "data", root=repo, resume=True)
    assert (out / "results" / "stale.csv").exists()
    reproduce.reproduce("quick", ["buffer_io"], out, data=tmp_path / "data", root=repo, overwrite=True)
    assert not (out / "results" / "stale.csv").exists()
    other = tmp_path / "not-a-reproduction"
    other.mkdir()
    (other / "mine.txt").write_text("keep me")
    with pytest.raises(ConfigError, match="holds no reproduction.json"):
        reproduce.reproduce("quick", ["buffer_io"], other, data=tmp_path / "data", root=repo, overwrite=True)
    assert (other / "mine.txt").read_text() == "keep me"


def test_a_resumed_reproduction_of_another_figure_keeps_the_earlier_times(repo, tmp_path):
    out = tmp_path / "repro"
    reproduce.reproduce("quick", ["buffer_io"], out, data=tmp_path / "data", root=repo)
    times = reproduce.reproduce("quick", ["work_depth"], out, data=tmp_path / "data", root=repo, resume=True)
    assert set(times) == {"buffer_io", "work_depth"}
    text = (out / "results" / "REPORT.md").read_text()
    assert "| buffer_io |" in text and "| work_depth |" in text
    manifest = json.loads((out / reproduce.MANIFEST).read_text())
    assert manifest["jobs"] == ["buffer_io", "work_depth"] and set(manifest["times_s"]) == set(times)


def test_a_resumed_reproduction_interrupted_again_keeps_the_earlier_times(repo, tmp_path, monkeypatch):
    out = tmp_path / "repro"
    first = reproduce.reproduce("quick", ["buffer_io"], out, data=tmp_path / "data", root=repo)

    def interrupted(mode, paths):
        raise KeyboardInterrupt

    job = dataclasses.replace(FIGURES.get("work_depth"), run=interrupted)
    monkeypatch.setattr(reproduce, "plan", lambda only: [job])
    with pytest.raises(KeyboardInterrupt):
        reproduce.reproduce("quick", ["work_depth"], out, data=tmp_path / "data", root=repo, resume=True)
    manifest = json.loads((out / reproduce.MANIFEST).read_text())
    assert manifest["status"] == "running" and manifest["times_s"] == first
    assert manifest["jobs"] == ["buffer_io", "work_depth"]


def test_expected_remaining_time_from_the_reference_at_this_machines_pace(tmp_path):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "REPORT.md").write_text(
        "# Report\n\n## Time per figure\n\n| figure | seconds |\n|---|---|\n| a | 60 |\n| b | 120 |\n| c | 240 |\n"
        "| total | 420 |\n\n## Notes\n\n| x | 5 |\n")
    reference = reproduce.reference_times("quick", tmp_path)
    assert reference == {"a": 60.0, "b": 120.0, "c": 240.0}
    assert reproduce.expected_remaining(["a", "b", "c"], {}, reference) == "about 7 min"
    assert reproduce.expected_remaining(["a", "b", "c"], {"a": 120.0}, reference) == "about 12 min"  # twice as slow
    assert reproduce.expected_remaining(["a", "d"], {}, reference) == "about 1 min and d (no reference time)"
    assert reproduce.expected_remaining(["d", "e"], {}, reference) == "unknown (no reference time for d, e)"
    assert reproduce.reference_times("full", tmp_path) == {}  # no results/full/REPORT.md


def test_a_reproduction_prints_a_progress_line_per_job(repo, tmp_path, capsys):
    reproduce.reproduce("quick", ["buffer_io", "work_depth"], tmp_path / "repro", data=tmp_path / "data", root=repo)
    lines = [line for line in capsys.readouterr().err.splitlines() if "expected remaining" in line]
    assert [line.split(":")[0] for line in lines] == ["[reproduce quick] 1/2 buffer_io",
                                                      "[reproduce quick] 2/2 work_depth"]


def test_the_reference_folder_is_refused_as_out(repo, tmp_path):
    for out in (repo / "results", repo / "results" / "full"):
        with pytest.raises(ConfigError, match="inside the committed reference"):
            reproduce.reproduce("quick", ["buffer_io"], out, data=tmp_path / "data", root=repo)
    assert sorted(p.name for p in (repo / "results").iterdir()) == ["buffer_io.csv"]


def test_update_reference_copies_the_outputs_and_regenerates_the_report(repo, tmp_path):
    out = tmp_path / "repro"
    times = reproduce.reproduce("quick", ["buffer_io"], out, data=tmp_path / "data", root=repo)
    target = reproduce.update_reference(out, "quick", ["buffer_io"], root=repo, job_times=times)
    assert target == repo / "results"
    assert (repo / "results" / "buffer_io.csv").read_bytes() == (out / "results" / "buffer_io.csv").read_bytes()
    assert (repo / "results" / "buffer_io.png").exists() and (repo / "results" / "REPORT.md").exists()
    # the copied tables make the tree dirty: the report names the clean commit they were measured at
    head = _git(repo, "rev-parse", "HEAD")
    assert f"(git {head[:12]})" in (repo / "results" / "REPORT.md").read_text()


def test_update_reference_keeps_the_reference_times_of_jobs_it_did_not_copy(repo, tmp_path):
    """A resumed reproduction returns its folder's earlier jobs' times too; only the copied jobs' replace the
    reference's (a reference regenerated job by job from several folders keeps each job's own time)."""
    out = tmp_path / "repro"
    times = reproduce.reproduce("quick", ["buffer_io"], out, data=tmp_path / "data", root=repo)
    reproduce.update_reference(out, "quick", ["buffer_io"], root=repo,
                               job_times={**times, "work_depth": 999.0, "cost": 998.0})
    recorded = reproduce.reference_times("quick", repo)
    assert set(recorded) == {"buffer_io"} and recorded["buffer_io"] == pytest.approx(times["buffer_io"], abs=1)


def test_update_reference_refuses_a_tree_with_uncommitted_changes(repo, tmp_path):
    out = tmp_path / "repro"
    times = reproduce.reproduce("quick", ["buffer_io"], out, data=tmp_path / "data", root=repo)
    (repo / "results" / "buffer_io.csv").write_text("edited\n")  # a tracked file changed, not committed
    with pytest.raises(ConfigError, match="^--update-reference: the tree has uncommitted changes"):
        reproduce.update_reference(out, "quick", ["buffer_io"], root=repo, job_times=times)
    assert (repo / "results" / "buffer_io.csv").read_text() == "edited\n"  # nothing copied
    assert not (repo / "results" / "REPORT.md").exists()
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-am", "edit")
    assert reproduce.require_clean_tree(repo) == _git(repo, "rev-parse", "HEAD")


def test_the_report_flags_rows_of_another_commit_or_of_uncommitted_code(tmp_path):
    pd.DataFrame({"seed": [0, 1], "git_sha": ["aaa", "aaa"]}).to_csv(tmp_path / "same.csv", index=False)
    pd.DataFrame({"seed": [0, 1], "git_sha": ["aaa", "bbb-dirty"]}).to_csv(tmp_path / "mixed.csv", index=False)
    pd.DataFrame({"seed": [0]}).to_csv(tmp_path / "no_sha.csv", index=False)
    commits = report.table_commits(tmp_path)
    assert commits == {"mixed.csv": ["aaa", "bbb-dirty"], "same.csv": ["aaa"]}
    lines = report.provenance_lines(commits, "aaa")
    assert lines[1] == "## Provenance" and lines[-1] == "- `mixed.csv`: bbb-dirty" and len(lines) == 6
    assert report.provenance_lines({"same.csv": ["aaa"]}, "aaa") == []
    assert report.provenance_lines({"same.csv": ["aaa-dirty"]}, "aaa-dirty")[-1] == "- `same.csv`: aaa-dirty"


def test_rows_of_a_commit_that_differs_only_in_results_or_docs_count_as_the_reports_code(repo):
    """A reference regenerated job by job at one code commit: the commits that only add results or change the
    documentation hold that code; a commit that changes code, uncommitted code and an unknown commit do not."""
    from suite.provenance import same_code

    def commit(path: str, text: str) -> str:
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
        _git(repo, "add", "-A")
        _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", path)
        return _git(repo, "rev-parse", "HEAD")

    code = commit("code.py", "x = 1\n")
    results_only = commit("results/full/a.csv", "seed\n0\n")
    docs_only = commit("docs/disk.md", "a sentence\n")
    readme_only = commit("README.md", "a line\n")
    changed = commit("code.py", "x = 2\n")
    assert same_code(code, results_only, repo) and same_code(results_only, code, repo)
    assert same_code(code, docs_only, repo) and same_code(code, readme_only, repo)  # documentation is not code
    assert not same_code(docs_only, changed, repo)
    assert not same_code(code, changed, repo) and not same_code(results_only, changed, repo)
    assert not same_code(code + "-dirty", results_only, repo) and not same_code("0" * 40, code, repo)
    commits = {"a.csv": [code], "b.csv": [changed]}
    lines = report.provenance_lines(commits, results_only, lambda a, b: same_code(a, b, repo))
    assert lines[-1] == f"- `b.csv`: {changed[:12]}" and not any("a.csv" in line for line in lines)
    assert report.provenance_lines({"a.csv": [code]}, results_only, lambda a, b: same_code(a, b, repo)) == []


def test_the_report_lists_tables_no_job_writes_apart():
    commits = {"disk_nc.csv": ["bbb"], "disk_nc_deep.csv": ["ccc"], "same.csv": ["aaa"]}
    lines = report.provenance_lines(commits, "aaa", side=frozenset({"disk_nc_deep.csv"}))
    apart = lines.index(next(line for line in lines if line.startswith("Tables no job of the reproduction writes")))
    assert "- `disk_nc.csv`: bbb" in lines[:apart] and lines[apart + 2:] == ["- `disk_nc_deep.csv`: ccc"]
    assert {"disk_nc.csv", "sampling.csv", "REPORT.md"} - report.reproduced_tables() == {"REPORT.md"}
    assert "disk_nc_deep.csv" not in report.reproduced_tables()
    only_side = report.provenance_lines({"disk_nc_deep.csv": ["ccc"]}, "aaa", side=frozenset({"disk_nc_deep.csv"}))
    assert not any(line.startswith("Rows measured at other code") for line in only_side)  # no header without rows
    assert only_side[1] == "## Provenance" and only_side[-1] == "- `disk_nc_deep.csv`: ccc"


def test_a_reference_updated_job_by_job_keeps_the_other_jobs_times():
    reference = {"sampling": 400.0, "pipeline": 990.0, "disk_nc": 3390.0}
    merged = reproduce.merged_times(reference, {"disk_nc": 1900.0, "disk_lp": 2000.0})
    assert merged == {"sampling": 400.0, "pipeline": 990.0, "disk_nc": 1900.0, "disk_lp": 2000.0}
    assert list(merged) == [name for name in reproduce.figure_names() if name in merged]
    assert reproduce.merged_times(reference, None) is None


def test_cli_refuses_results_as_out_with_a_one_line_error(capsys):
    assert gnnsuite(["reproduce", "--quick", "--only", "buffer_io", "--out", str(reproduce.reference_dir("quick")),
                     "--no-compare"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gnnsuite: error: --out:")


# ---------------------------------------------------------------------------------------------- claims
def _sampling_table(times: dict[int, tuple[list[float], list[float]]], quick: bool = False) -> pd.DataFrame:
    """naive and DENSE rows per layer count from per-repeat times (the ratios computed as the experiment does)."""
    from experiments.figures.sampling import add_ratios

    rows = []
    for layers, (naive, dense) in times.items():
        for sampler, values in (("naive", naive), ("dense", dense)):
            rows.append({"setting": "papers", "dataset": "papers-like-s", "num_roots": 1000, "layers": layers,
                         "sampler": sampler, "status": "ok", "time_s": sorted(values)[len(values) // 2],
                         "times_s": json.dumps(values), "sampled_edges": 100 * layers * (2 if sampler == "naive"
                                                                                          else 1),
                         "quick": quick, "under_load": False})
    return add_ratios(pd.DataFrame(rows))


def _repeats(ratio: float, n: int = 8, jitter: float = 0.02) -> tuple[list[float], list[float]]:
    dense = [0.010 * (1 + 0.05 * (i % 3)) for i in range(n)]
    return [d * ratio * (1 + jitter * ((-1) ** i)) for i, d in enumerate(dense)], dense


@pytest.mark.parametrize("ratios, verdict", [
    ({3: 1.3, 4: 1.6, 5: 2.0}, report.HOLDS),              # faster at every depth, and growing
    ({3: 1.3, 4: 1.3, 5: 1.3}, report.INCONCLUSIVE),       # faster, but the growth's interval straddles 0
    ({3: 2.0, 4: 1.6, 5: 1.3}, report.FAILS),              # the advantage shrinks
    ({3: 0.8, 4: 1.6, 5: 2.0}, report.FAILS),              # slower at 3 layers
])
def test_dense_claim_is_decided_from_paired_repeats(tmp_path, ratios, verdict):
    _sampling_table({layers: _repeats(r) for layers, r in ratios.items()}).to_csv(tmp_path / "sampling.csv",
                                                                                 index=False)
    finding = report.claims().get("dense-speedup").evaluate(tmp_path)
    assert finding.verdict == verdict
    assert "papers: naive/DENSE time 1." in finding.measured or "papers: naive/DENSE time 2." in finding.measured \
        or "papers: naive/DENSE time 0." in finding.measured
    assert "[" in finding.measured and {e.name for e in finding.estimates} >= {"papers L3 naive/DENSE time"}


def test_dense_claim_from_one_repeat_is_inconclusive(tmp_path):
    _sampling_table({3: ([0.02], [0.01]), 4: ([0.03], [0.01]), 5: ([0.05], [0.01])}).to_csv(
        tmp_path / "sampling.csv", index=False)
    finding = report.claims().get("dense-speedup").evaluate(tmp_path)
    assert finding.verdict == report.INCONCLUSIVE
    assert "no interval" in finding.measured


def test_dense_claim_leaves_out_rows_measured_under_load(tmp_path):
    table = _sampling_table({layers: _repeats(r) for layers, r in {3: 1.3, 4: 1.6, 5: 2.0}.items()})
    table.loc[table["layers"] == 5, "under_load"] = True
    table.to_csv(tmp_path / "sampling.csv", index=False)
    finding = report.claims().get("dense-speedup").evaluate(tmp_path)
    assert "at 3, 4 layers" in finding.measured
    assert finding.excluded.startswith("1 measured under foreign load, left out: papers L5")


def test_old_tables_without_repeats_cannot_be_decided(tmp_path):
    pd.DataFrame([{"setting": "papers", "layers": layers, "sampler": sampler, "status": "ok",
                   "time_ratio_vs_dense": 2.0 if sampler == "naive" else 1.0, "edges_ratio_vs_dense": 1.5,
                   "quick": True} for layers in (3, 4) for sampler in ("naive", "dense")]).to_csv(
        tmp_path / "sampling.csv", index=False)
    finding = report.claims().get("dense-speedup").evaluate(tmp_path)
    assert finding.verdict == report.INCONCLUSIVE and "missing" in finding.reason


def test_missing_tables_are_not_testable_with_the_reason(tmp_path):
    for item in report.claims().in_order():
        finding = item.evaluate(tmp_path)
        assert finding.verdict == report.NOT_TESTABLE and "missing" in finding.reason


@pytest.mark.parametrize("gaps, verdict", [
    ({"b16 ooo": [-0.002, 0.001, -0.001]}, report.HOLDS),
    ({"b16 ooo": [-0.05, -0.04, -0.06]}, report.FAILS),
    ({"b16 ooo": [-0.03, 0.01, -0.02]}, report.INCONCLUSIVE),      # the interval straddles -0.01
    ({"b16": [0.0, 0.0, 0.0], "b16 ooo": [-0.05, -0.04, -0.06]}, report.FAILS),  # the check does not outvote
])
def test_async_accuracy_claim(tmp_path, gaps, verdict):
    _async_table(tmp_path, gaps)
    assert report.claims().get("async-accuracy").evaluate(tmp_path).verdict == verdict


def _async_table(path: Path, gaps: dict[str, list[float]], staleness: int = 12) -> None:
    sync = [0.70, 0.72, 0.71]
    rows = [{"dataset": "arxiv-like", "configuration": "sync", "seed": s, "test_accuracy": a, "staleness_max": 0}
            for s, a in enumerate(sync)]
    for config, values in gaps.items():
        rows += [{"dataset": "arxiv-like", "configuration": config, "seed": s, "test_accuracy": sync[s] + g,
                  "staleness_max": staleness} for s, g in enumerate(values)]
    pd.DataFrame(rows).to_csv(path / "pipeline_accuracy.csv", index=False)


def test_async_runs_identical_to_sync_or_without_staleness_are_checks_not_evidence(tmp_path):
    claim = report.claims().get("async-accuracy")
    _async_table(tmp_path, {"b16": [0.0, 0.0, 0.0]})  # in-order async: sync's computation, bitwise
    finding = claim.evaluate(tmp_path)
    assert finding.verdict == report.INCONCLUSIVE and "no configuration trained on stale parameters" in finding.reason
    assert "b16: equal to sync on all 3 seeds (identical by construction)" in finding.measured
    _async_table(tmp_path, {"b16 ooo": [-0.002, 0.001, -0.001]}, staleness=0)
    finding = claim.evaluate(tmp_path)
    assert finding.verdict == report.INCONCLUSIVE and "no stale computation recorded" in finding.measured


def test_async_accuracy_claim_needs_three_seeds(tmp_path):
    rows = [{"dataset": "a", "configuration": c, "seed": s, "test_accuracy": 0.7} for c in ("sync", "b16")
            for s in (0, 1)]
    pd.DataFrame(rows).to_csv(tmp_path / "pipeline_accuracy.csv", index=False)
    finding = report.claims().get("async-accuracy").evaluate(tmp_path)
    assert finding.verdict == report.INCONCLUSIVE and "2 seed(s); the claim needs 3" in finding.reason


def test_pipeline_claim_is_not_testable_without_an_accelerator_and_shows_the_projection(tmp_path):
    speed = pd.DataFrame([
        {"dataset": "d", "sampler": "dense", "system": "in_memory", "configuration": "in_memory",
         "epoch_time_s": 1.0, "time_ratio_vs_in_memory": 1.0, "compute_utilization": 0.97, "device": "cpu"},
        {"dataset": "d", "sampler": "dense", "system": "pipelined", "configuration": "4T 2X q4/4 b16",
         "epoch_time_s": 1.1, "time_ratio_vs_in_memory": 1.1, "compute_utilization": 0.96, "device": "cpu"},
    ])
    speed.to_csv(tmp_path / "pipeline_speed.csv", index=False)
    pd.DataFrame([
        {"dataset": "d", "sampler": "dense", "profile": "p3.2xlarge", "configuration": "sync", "seeds": 5,
         "compute_utilization": 0.4, "compute_utilization_ci_low": 0.39, "compute_utilization_ci_high": 0.41,
         "hardware": "V100"},
        {"dataset": "d", "sampler": "dense", "profile": "p3.2xlarge", "configuration": "4T 2X q4/4 b16", "seeds": 5,
         "compute_utilization": 0.95, "compute_utilization_ci_low": 0.94, "compute_utilization_ci_high": 0.96,
         "time_ratio_vs_sync": 0.45, "time_ratio_vs_sync_ci_low": 0.44, "time_ratio_vs_sync_ci_high": 0.46,
         "hardware": "V100"},
    ]).to_csv(tmp_path / "pipeline_projection.csv", index=False)
    finding = report.claims().get("pipeline-utilization").evaluate(tmp_path)
    assert finding.verdict == report.NOT_TESTABLE and "no accelerator" in finding.reason
    assert "PROJECTION (simulator, not a measurement) on p3.2xlarge" in finding.measured
    assert "the projection holds" in finding.measured and "measured here on the CPU" in finding.measured


def test_a_verdict_without_an_interval_becomes_inconclusive(tmp_path):
    item = report.Claim("point", "a point estimate", (), lambda results: report.Finding("1.5", "", report.HOLDS))
    finding = item.evaluate(tmp_path)
    assert finding.verdict == report.INCONCLUSIVE and "point estimate" in finding.reason
    bad = report.Claim("bad", "a made-up verdict", (), lambda results: report.Finding("", "", "partly"))
    with pytest.raises(ValueError, match="not one of"):
        bad.evaluate(tmp_path)


# ---------------------------------------------------------------------------------------------- report --against
def _folder(path: Path, ratio_low: float, ratio_high: float, swaps: int = 42) -> Path:
    path.mkdir(parents=True)
    table = _sampling_table({layers: _repeats(r) for layers, r in {3: 1.3, 4: 1.6, 5: 2.0}.items()})
    table.loc[table["sampler"] == "naive", "time_ratio_vs_dense_ci_low"] = ratio_low
    table.loc[table["sampler"] == "naive", "time_ratio_vs_dense_ci_high"] = ratio_high
    table.to_csv(path / "sampling.csv", index=False)
    pd.DataFrame([{"policy": "beta", "num_partitions": 16, "capacity": 4, "logical_partitions": 16, "swaps": swaps,
                   "bytes_read": 1e9, "bytes_written": 5e8, "epoch_time_prefetch_s": 10.0}]).to_csv(
        path / "buffer_io.csv", index=False)
    return path


def test_comparison_flags_only_intervals_that_do_not_overlap_and_exact_changes(tmp_path):
    reference = _folder(tmp_path / "reference", 1.2, 2.2)
    same = _folder(tmp_path / "same", 1.5, 2.5)
    assert compare.compare(same, reference).flagged == 0
    moved = _folder(tmp_path / "moved", 3.0, 4.0, swaps=40)
    result = compare.compare(moved, reference)
    text = result.text()
    # the three naive rows' ratio intervals moved (in the table, and in the claim's estimates), one exact swap
    # count changed
    assert result.flagged == 3 + 3 + 1
    assert text.count("papers L") == 3 and "papers L3 naive/DENSE time" in text
    assert "time_ratio_vs_dense" in text and "[FLAGGED: intervals do not overlap]" in text
    assert "swaps 42 -> 40  [FLAGGED: exact value changed]" in text
    assert "dense-speedup: " in text


def test_comparison_leaves_absolute_times_to_the_machine_and_compares_ratios(tmp_path):
    def table(seconds: float, ratio: float) -> pd.DataFrame:
        return pd.DataFrame([{"configuration": "disk", "epoch_time_s": seconds, "epoch_time_s_ci_low": seconds * 0.9,
                              "epoch_time_s_ci_high": seconds * 1.1, "time_ratio_vs_in_memory": ratio,
                              "time_ratio_vs_in_memory_ci_low": ratio * 0.95,
                              "time_ratio_vs_in_memory_ci_high": ratio * 1.05}])

    spec = compare.TableSpec(("configuration",))
    slower_machine = compare.compare_table("disk_nc.csv", table(20.0, 1.0), table(10.0, 1.0), spec)
    assert slower_machine[1] == 0 and "absolute times not compared (epoch_time_s" in slower_machine[0][0]
    slower_system = compare.compare_table("disk_nc.csv", table(10.0, 2.0), table(10.0, 1.0), spec)
    assert slower_system[1] == 1 and "time_ratio_vs_in_memory" in slower_system[0][1]
    assert compare.machine_dependent("read_bandwidth_bytes_per_s") and not compare.machine_dependent("test_accuracy")


def test_comparison_lists_what_a_table_or_claim_marks_as_moving_with_the_machine_and_flags_the_rest():
    """A projection calibrated on this machine (its interval over simulator seeds only) is listed, not flagged."""
    def table(ratio: float) -> pd.DataFrame:
        return pd.DataFrame([{"configuration": "4T", "time_ratio_vs_sync": ratio,
                              "time_ratio_vs_sync_ci_low": ratio * 0.95, "time_ratio_vs_sync_ci_high": ratio * 1.05}])

    marked = compare.TableSpec(("configuration",), machine_dependent=("time_ratio_vs_sync",))
    lines, flagged = compare.compare_table("pipeline_projection.csv", table(0.5), table(0.4), marked)
    assert flagged == 0 and "not compared (time_ratio_vs_sync: they move with the machine" in lines[0]
    assert compare.compare_table("pipeline_projection.csv", table(0.5), table(0.4),
                                 compare.TableSpec(("configuration",)))[1] == 1

    def finding(low: float, high: float, moves: bool) -> report.Finding:
        interval = Interval((low + high) / 2, low, high, 5, "t")
        return report.Finding("", "", report.HOLDS, (report.Estimate("projection ratio", interval, "< 1", moves),))

    lines, flagged = compare.compare_claims({"c": finding(0.4, 0.5, True)}, {"c": finding(0.6, 0.7, True)})
    assert flagged == 0 and "moves with the machine: not flagged" in lines[1]
    assert compare.compare_claims({"c": finding(0.4, 0.5, False)}, {"c": finding(0.6, 0.7, False)})[1] == 1


def test_report_command_compares_a_reproduction_folder(tmp_path, capsys):
    reference = _folder(tmp_path / "reference", 1.2, 2.2)
    reproduction = tmp_path / "repro"
    _folder(reproduction / "results", 3.0, 4.0)
    assert gnnsuite(["report", str(reproduction), "--against", str(reference)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"comparison of {reproduction / 'results'} against the reference {reference}")
    assert gnnsuite(["report", str(reproduction), "--against", str(reference), "--strict"]) == 1
    assert gnnsuite(["report", str(tmp_path / "nowhere"), "--against", str(reference)]) == 2
    assert "no results folder" in capsys.readouterr().err


def test_interval_format():
    assert report.table_interval(pd.Series({"x": 1.5, "x_ci_low": 1.2, "x_ci_high": 1.9}), "x").format(2) == \
        "1.50 [1.20, 1.90]"
    assert math.isnan(report.table_interval(pd.Series({"x": 1.5}), "x").low)


def _pyg_table(ratios: dict[int, tuple[float, float, float]], status="ok", edges_ratio=1.0) -> pd.DataFrame:
    """Sampling rows of DENSE and PyG per layer count: PyG's time / DENSE's (estimate, low, high) over paired
    repeats."""
    rows = []
    for count, (ratio, low, high) in ratios.items():
        base = {"setting": "papers", "dataset": "papers-like-s", "num_roots": 1000, "layers": count,
                "backend": "torch_geometric.sampler.NeighborSampler (torch-sparse)", "quick": False}
        rows.append({**base, "sampler": "dense", "status": "ok", "reason": None, "time_ratio_vs_dense": 1.0})
        rows.append({**base, "sampler": "pyg", "status": status,
                     "reason": "pyg-lib/torch-sparse not installed" if status != "ok" else None,
                     "time_ratio_vs_dense": ratio, "time_ratio_vs_dense_ci_low": low,
                     "time_ratio_vs_dense_ci_high": high, "paired_repeats": 10, "edges_ratio_vs_dense": edges_ratio})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("ratios, verdict", [
    ({1: (3.0, 2.8, 3.2), 2: (2.0, 1.8, 2.2)}, report.HOLDS),          # PyG slower at every layer count
    ({1: (3.0, 2.8, 3.2), 2: (1.1, 0.9, 1.3)}, report.INCONCLUSIVE),   # one interval straddles 1
    ({1: (3.0, 2.8, 3.2), 2: (0.5, 0.45, 0.55)}, report.FAILS),
])
def test_dense_vs_pyg_is_decided_from_the_paired_intervals(tmp_path, ratios, verdict):
    _pyg_table(ratios).to_csv(tmp_path / "sampling.csv", index=False)
    finding = report.claims().get("dense-vs-pyg").evaluate(tmp_path)
    assert finding.verdict == verdict
    assert "1L x3.000 [2.800, 3.200]" in finding.measured


def test_dense_vs_pyg_counts_edges_per_second(tmp_path):
    # PyG takes twice DENSE's time but samples three times the edges: DENSE is slower per edge
    _pyg_table({1: (2.0, 1.9, 2.1)}, edges_ratio=3.0).to_csv(tmp_path / "sampling.csv", index=False)
    assert report.claims().get("dense-vs-pyg").evaluate(tmp_path).verdict == report.FAILS


def test_dense_vs_pyg_not_testable_when_pyg_was_skipped(tmp_path):
    _pyg_table({1: (1.0, 1.0, 1.0)}, status="skipped").to_csv(tmp_path / "sampling.csv", index=False)
    finding = report.claims().get("dense-vs-pyg").evaluate(tmp_path)
    assert finding.verdict == report.NOT_TESTABLE and "pyg-lib/torch-sparse not installed" in finding.measured
