"""Run specs: validation on load, field-path errors, overrides, resolved form and run ids."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from suite.config import apply_overrides, load_spec, parse_override, spec_from_dict

REPO = Path(__file__).resolve().parents[2]
from suite.errors import ConfigError

BASE = {"dataset": {"name": "synthetic", "preset": "tiny"}, "model": {"num_layers": 2, "fanouts": [5, 5]}}


def _write(tmp_path, text: str):
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


def test_defaults_are_filled_and_frozen():
    spec = spec_from_dict(BASE)
    assert spec.model.fanouts == (5, 5)
    assert spec.system.name == "in_memory" and spec.training.optimizer == "adam"
    assert spec.resolved()["model"]["fanouts"] == [5, 5]
    with pytest.raises(Exception):
        spec.seed = 3  # frozen


def test_dataset_split_enters_the_run_id_only_when_given():
    base = spec_from_dict(BASE)
    assert base.run_id == "in_memory-tiny-graphsage-s0-9d011344923c"  # the id before dataset.split existed
    split = spec_from_dict(apply_overrides(BASE, ["dataset.split={seed: 1}"]))
    assert split.run_id != base.run_id
    assert split.dataset.split is not None and split.dataset.split.seed == 1
    with pytest.raises(ConfigError, match="not both"):
        spec_from_dict(apply_overrides(BASE, ["dataset.split={per_class: [20, 30], fractions: [0.6, 0.2, 0.2]}"]))


def test_run_id_is_stable_and_depends_on_every_field():
    first, second = spec_from_dict(BASE), spec_from_dict(dict(BASE))
    assert first.run_id == second.run_id
    assert first.run_id != spec_from_dict({**BASE, "seed": 1}).run_id
    assert first.run_id != spec_from_dict(apply_overrides(BASE, ["training.learning_rate=0.02"])).run_id
    assert first.run_id.startswith("in_memory-tiny-graphsage-s0-")
    assert first.evaluation.graph == "full"
    assert first.run_id != spec_from_dict(apply_overrides(BASE, ["evaluation.graph=buffer"])).run_id


def test_runs_recorded_before_evaluation_graph_keep_their_ids():
    # ids computed by the code of 8358399, before the field: an in-memory run evaluated the whole graph (full, the
    # default), a disk run its buffer; a disk run at the default full evaluates otherwise and is another run
    disk = apply_overrides(BASE, ["system.name=disk",
                                  "system.options={policy: sequential, num_partitions: 4, buffer_capacity: 2}"])
    assert spec_from_dict(BASE).run_id == "in_memory-tiny-graphsage-s0-9d011344923c"
    assert spec_from_dict(apply_overrides(disk, ["evaluation.graph=buffer"])).run_id == \
        "disk-tiny-graphsage-s0-c2aea4a71c1c"
    assert spec_from_dict(disk).run_id != "disk-tiny-graphsage-s0-c2aea4a71c1c"


def test_feature_normalization_input_dropout_and_restore_best_enter_the_run_id_only_when_set():
    base = spec_from_dict(BASE)
    assert base.dataset.feature_normalization == "none" and base.model.input_dropout == 0.0
    assert base.evaluation.restore_best is False
    assert base.run_id == "in_memory-tiny-graphsage-s0-9d011344923c"  # the id before the three fields existed
    assert base.model.gcn_normalization == "row"
    for override in ("dataset.feature_normalization=row", "model.input_dropout=0.5", "evaluation.restore_best=true",
                     "model.gcn_normalization=symmetric", "model.embedding_dropout=0.3"):
        assert spec_from_dict(apply_overrides(BASE, [override])).run_id != base.run_id, override


def test_overrides_parse_yaml_values():
    assert parse_override("model.fanouts=[3, 4]") == (("model", "fanouts"), [3, 4])
    assert parse_override("training.learning_rate=1e-3") == (("training", "learning_rate"), 0.001)
    data = apply_overrides(BASE, ["model.fanouts=[3, 4]", "sampler.replace=true", "system.options.world_size=1"])
    spec = spec_from_dict(data)
    assert spec.model.fanouts == (3, 4) and spec.sampler.replace is True
    assert spec.system.options == {"world_size": 1}
    with pytest.raises(ConfigError, match=r"system.options.x: unknown field"):
        spec_from_dict(apply_overrides(BASE, ["system.options.x=1"]), source="base.yaml")
    assert BASE["model"]["fanouts"] == [5, 5]  # the input is not modified


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["system.name=warp"], r"spec\.yaml: system\.name: unknown system 'warp' \(known: .*in_memory"),
        (["model.encoder=transformer"], r"spec\.yaml: model\.encoder: unknown model 'transformer'"),
        (["sampler.name=magic"], r"spec\.yaml: sampler\.name: unknown sampler 'magic'"),
        (["dataset.name=imagenet"], r"spec\.yaml: dataset\.name: unknown dataset 'imagenet'"),
        (["machine.profile=cray"], r"spec\.yaml: machine\.profile: unknown machine profile 'cray'"),
        (["training.epochs=three"], r"spec\.yaml: training\.epochs: Input should be a valid integer"),
        (["training.batch_size=0"], r"spec\.yaml: training\.batch_size: Input should be greater than 0"),
        (["model.fanouts=[5, 5, 5]"], r"spec\.yaml: model\.fanouts: expected 2 entries .*got 3"),
        (["evaluation.fanouts=[5]"], r"spec\.yaml: evaluation\.fanouts: expected 2 entries"),
        (["training.task=regression"], r"spec\.yaml: training\.task: Input should be"),
        (["model.hidden=3"], r"spec\.yaml: model\.hidden: unknown field"),
        (["model.fanouts=[5, 0]"], r"spec\.yaml: model\.fanouts: each must be > 0 or -1"),
        (["evaluation.graph=partial"], r"spec\.yaml: evaluation\.graph: Input should be 'full' or 'buffer'"),
        (["dataset.feature_normalization=l2"], r"spec\.yaml: dataset\.feature_normalization: Input should be 'none' "
                                               r"or 'row'"),
        (["model.input_dropout=1.0"], r"spec\.yaml: model\.input_dropout: Input should be less than 1"),
        (["evaluation.restore_best=true", "evaluation.splits=[test]"],
         r"spec\.yaml: evaluation\.restore_best: selects by the validation metric; 'valid' must be in"),
    ],
)
def test_bad_specs_name_file_and_field(tmp_path, overrides, message):
    path = _write(tmp_path, "dataset: {name: synthetic, preset: tiny}\nmodel: {num_layers: 2, fanouts: [5, 5]}\n")
    with pytest.raises(ConfigError, match=message) as err:
        load_spec(path, overrides)
    assert "\n" not in str(err.value)


def test_missing_dataset_section_and_bad_yaml(tmp_path):
    with pytest.raises(ConfigError, match=r"spec\.yaml: dataset: required field is missing"):
        load_spec(_write(tmp_path, "seed: 1\n"))
    with pytest.raises(ConfigError, match=r"spec\.yaml: invalid YAML at line 3"):
        load_spec(_write(tmp_path, "seed: 1\nmodel: {a: 1\n  b: ]\n"))
    with pytest.raises(ConfigError, match=r"nope\.yaml: file not found"):
        load_spec(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="expected key.path=value"):
        parse_override("seed")


def test_run_id_comes_from_the_data_not_from_how_its_paths_are_written(tmp_path, monkeypatch):
    """The dataset's identity: a synthetic graph is its generator configuration (wherever it is cached, and with
    params equal to the preset's defaults or left out), a raw folder its resolved path, a store its checksums."""
    base = spec_from_dict(BASE)
    assert spec_from_dict(apply_overrides(BASE, [f"dataset.cache_dir={tmp_path / 'elsewhere'}"])).run_id == base.run_id
    assert spec_from_dict(apply_overrides(BASE, ["dataset.params={num_nodes: 300}"])).run_id == base.run_id  # tiny's
    assert spec_from_dict(apply_overrides(BASE, ["dataset.params={num_nodes: 301}"])).run_id != base.run_id
    assert spec_from_dict(apply_overrides(BASE, ["system.options={}"])).run_id == base.run_id

    raw = tmp_path / "raw" / "planetoid"
    raw.mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "raw")
    cora = {"dataset": {"name": "cora", "root": "planetoid"}}
    relative, absolute = spec_from_dict(cora), spec_from_dict({"dataset": {"name": "cora", "root": str(raw)}})
    dotted = spec_from_dict({"dataset": {"name": "cora", "root": "../raw/./planetoid", "cache_dir": "/tmp/x"}})
    assert relative.run_id == absolute.run_id == dotted.run_id
    assert relative.legacy_run_id != absolute.legacy_run_id  # folders recorded before: hashed as written

    from suite.data.synthetic import PRESETS, generate

    generate(PRESETS.get("tiny"), tmp_path / "store-a")
    import shutil

    shutil.copytree(tmp_path / "store-a", tmp_path / "store-b")
    generate(dataclasses.replace(PRESETS.get("tiny"), seed=1), tmp_path / "store-c")
    ids = [spec_from_dict({"dataset": {"name": "store", "root": str(tmp_path / name)}}).run_id
           for name in ("store-a", "store-b", "store-c")]
    assert ids[0] == ids[1] != ids[2]  # the same files in another folder are the same data; other files are not
    identity = spec_from_dict({"dataset": {"name": "store", "root": "../store-a"}}).identity()["dataset"]
    assert identity["root"].startswith("store-sha256:") and "cache_dir" not in identity


def test_runs_recorded_under_a_legacy_id_are_found_and_skipped(tmp_path):
    from suite.recorder import completed_run
    from suite.runner import run_spec

    spec = spec_from_dict(apply_overrides(BASE, ["training.epochs=1", "evaluation.splits=[]",
                                                 f"dataset.cache_dir={tmp_path / 'data'}"]))
    first = run_spec(spec, tmp_path / "runs")
    (tmp_path / "runs" / spec.run_id).rename(tmp_path / "runs" / spec.legacy_run_id)  # as recorded before
    assert completed_run(tmp_path / "runs", spec) == tmp_path / "runs" / spec.legacy_run_id
    again = run_spec(spec, tmp_path / "runs")
    assert again["skipped"] is True and again["finished_at"] == first["finished_at"]
    assert not (tmp_path / "runs" / spec.run_id).exists()


def test_the_run_id_does_not_depend_on_which_systems_a_process_has_imported():
    # a grid's workers compute run ids before importing any system: the id must be the driver's
    import pickle
    import subprocess
    import sys

    import systems.pipelined  # noqa: F401  (the driver has imported the system, the worker has not)

    spec = load_spec(REPO / "experiments" / "specs" / "quickstart.yaml", ["system.name=pipelined"])
    # the spec as a worker receives it: unpickled in a process that has imported nothing else
    code = "import pickle, sys; print(pickle.loads(sys.stdin.buffer.read()).run_id)"
    fresh = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(spec), capture_output=True, check=True)
    assert fresh.stdout.decode().strip() == spec.run_id
