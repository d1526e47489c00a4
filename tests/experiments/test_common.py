"""What the experiments share (experiments/common.py), and their scripts run as files without editing sys.path."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from experiments import common
from tests.support.paths import REPO_ROOT

SCRIPTS = sorted(path for folder in ("experiments", "experiments/figures", "experiments/measure")
                 for path in (REPO_ROOT / folder).glob("*.py") if path.name != "__init__.py")


def test_provenance_keeps_the_order_asked_and_the_given_values():
    import numpy

    prov = common.provenance("seed", "git_sha", "numpy", "date", seed=3)
    assert list(prov) == ["seed", "git_sha", "numpy", "date"]
    assert prov["seed"] == 3 and prov["numpy"] == numpy.__version__ and prov["date"][:2] == "20"


def test_write_csv_creates_the_folder_and_writes_atomically(tmp_path):
    path = common.write_csv(pd.DataFrame({"a": [1, 2], "b": [[1], {"x": 1}]}), tmp_path / "new" / "t.csv")
    assert path == tmp_path / "new" / "t.csv"
    assert pd.read_csv(path).to_dict("list") == {"a": [1, 2], "b": ["[1]", '{"x": 1}']}
    assert [p.name for p in path.parent.iterdir()] == ["t.csv"]  # no temporary file left


def test_common_options_parse_into_run_keywords():
    parser = common.add_common_options(argparse.ArgumentParser(), quick="small", results=("--out-dir", "--results"),
                                       runs=("--out",), data=("--data-dir",), seed=0, seeds=(0, 1), plot=True,
                                       quiet=True)
    assert vars(parser.parse_args([])) == {"mode": "full", "results": common.RESULTS, "runs": None,
                                           "data": common.DATA, "seed": 0, "seeds": [0, 1], "plot": True,
                                           "quiet": False}
    args = parser.parse_args(["--quick", "--out-dir", "r", "--out", "o", "--no-plot", "--seeds", "4"])
    assert (args.mode, args.results, args.runs, args.plot, args.seeds) == ("quick", Path("r"), Path("o"), False, [4])


def test_cli_turns_a_failed_job_into_its_status_and_one_line(capsys):
    def run(*, fail: int) -> None:
        if fail:
            raise common.JobFailed("2 runs failed", status=fail)

    assert common.cli(run, {"fail": 0}, "job") == 0
    assert common.cli(run, {"fail": 3}, "job") == 3
    assert capsys.readouterr().err == "job: 2 runs failed\n"


def test_failed_runs_are_named_and_fail_the_job(capsys):
    common.check_failed([])
    with pytest.raises(common.JobFailed, match="2 runs failed"):
        common.check_failed([{"run_id": "a", "error": "boom"}, {"run_id": "b", "error": "bang"}])
    assert capsys.readouterr().err == "failed: a: boom\nfailed: b: bang\n"


def test_a_setting_without_a_quick_variant_refuses_quick():
    parser = common.add_common_options(argparse.ArgumentParser(), quick="small")
    parser.add_argument("--deep-dive", action="store_true")
    assert common.parse(parser, ["--deep-dive"], no_quick=("--deep-dive",)).deep_dive
    with pytest.raises(SystemExit):
        common.parse(parser, ["--quick", "--deep-dive"], no_quick=("--deep-dive",))


def test_no_script_edits_sys_path():
    assert SCRIPTS and not [path.name for path in SCRIPTS if "sys.path" in path.read_text()]


@pytest.mark.parametrize("script", ["experiments/figures/buffer_io.py", "experiments/measure/store_open.py"])
def test_scripts_run_as_files_from_the_checkout(script):
    done = subprocess.run([sys.executable, script, "--help"], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout
