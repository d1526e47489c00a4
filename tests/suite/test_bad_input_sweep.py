"""The sweep of bad inputs (tests/suite/bad_inputs.py): every one a clean one-line error, nothing half-written."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.support.paths import REPO_ROOT


def test_every_bad_input_of_the_sweep_is_a_clean_one_line_error(tmp_path):
    report = tmp_path / "sweep.json"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "GNNSUITE_KERNEL_BOUNDSCHECK": "0"}  # as users run it
    result = subprocess.run([sys.executable, str(REPO_ROOT / "tests" / "suite" / "bad_inputs.py"), "--json",
                             str(report)], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=1500)
    assert report.exists(), result.stdout[-3000:] + result.stderr[-3000:]
    sweep = json.loads(report.read_text())
    assert sweep["total"] >= 100
    assert len({case["name"] for case in sweep["cases"]}) == sweep["total"]
    not_clean = [f"{case['category']}: {case['name']}: {case['detail']}" for case in sweep["cases"]
                 if case["category"] != "clean"]
    assert not not_clean, "\n".join(not_clean)
    assert sweep["counts"] == {"clean": sweep["total"], "traceback": 0, "crash": 0, "accepted": 0, "dirty": 0,
                               "other": 0}
    assert result.returncode == 0
