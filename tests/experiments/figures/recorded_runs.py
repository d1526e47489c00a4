"""Hand-made run folders as the recorder writes them (``config.yaml``, ``records.jsonl``, ``summary.json``), for
the tests of the figure jobs that read recorded runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from suite.config import load_spec

QUICKSTART = Path(__file__).resolve().parents[3] / "experiments" / "specs" / "quickstart.yaml"
MACHINE = {"cpu_model": "AMD EPYC", "cpu_cores": 2, "torch_threads": 2}


def write_run(root: Path, run_id: str, system: str, options: dict, epochs: list[dict[str, Any]],
              summary: dict[str, Any], batches: int = 0) -> Path:
    """A completed run of ``system`` (with ``options``) in ``root / run_id``: the quickstart spec, one ``epoch``
    record per entry of ``epochs`` (its fields), ``batches`` batch records before each (10 ms load, 1 ms transfer,
    50 ms compute per batch, one after the other) and ``summary`` over the run's id, status, system and machine."""
    spec = load_spec(QUICKSTART, [f"system.name={system}", "training.epochs=2"])
    if options:
        spec = spec.model_copy(update={"system": spec.system.model_copy(update={"options": options})})
    run_dir = root / run_id
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(spec.to_yaml())
    records = []
    for number, epoch in enumerate(epochs):
        for index in range(batches):
            t = index * 0.061
            records.append({"kind": "batch", "epoch": number, "index": index, "load_start": t,
                            "load_end": t + 0.01, "transfer_start": t + 0.01, "transfer_end": t + 0.011,
                            "compute_start": t + 0.011, "compute_end": t + 0.061, "sampled_edges": 20000,
                            "input_nodes": 5000})
        records.append({"kind": "epoch", "epoch": number, **epoch})
    (run_dir / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    full = {"run_id": run_id, "status": "completed", "system": system, "machine": MACHINE, "device": "cpu", **summary}
    (run_dir / "summary.json").write_text(json.dumps(full))
    return run_dir
