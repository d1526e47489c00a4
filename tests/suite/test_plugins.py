"""suite.plugin_tables and the plugin tables: every registry fills itself from its table on first use; knowing a name,
validating a spec or computing a run id imports only the plugins the spec names."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from suite import registry
from suite.memory import MEMORY_ESTIMATES
from suite.plugin_tables import plugin_table
from systems import plugins
from systems.disk.policies import POLICIES
from systems.disk.disk_system import DISK_TASKS
from systems.feature_cache.policies import CACHE_POLICIES
from tests.support.paths import REPO_ROOT

REGISTRIES = {
    "systems": registry.SYSTEMS, "system_variants": registry.SYSTEM_VARIANTS, "samplers": registry.SAMPLERS,
    "models": registry.MODELS, "decoders": registry.DECODERS, "tasks": registry.TASKS, "disk_tasks": DISK_TASKS,
    "policies": POLICIES, "cache_policies": CACHE_POLICIES, "memory_estimates": MEMORY_ESTIMATES,
}


def _modules_after(code: str) -> dict[str, list[str]]:
    """The project's modules imported after each step of ``code`` (steps print ``json`` via ``loaded(step)``)."""
    prelude = textwrap.dedent("""
        import json, sys
        STEPS = {}
        def loaded(step):
            STEPS[step] = sorted(m for m in sys.modules if m.split('.')[0] in
                                 ('suite', 'systems', 'simulators', 'experiments'))
    """)
    done = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code) + "\nprint(json.dumps(STEPS))"],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_spec_validation_and_run_id_import_only_what_the_spec_names():
    steps = _modules_after("""
        import systems.plugins
        loaded("table")
        from suite.registry import SAMPLERS, SYSTEMS
        assert "disk" in SYSTEMS and "dense" in SAMPLERS and "warp" not in SYSTEMS
        loaded("names")
        from suite.config import spec_from_dict
        spec = spec_from_dict({"dataset": {"name": "synthetic", "preset": "tiny"}, "system": {"name": "in_memory"}})
        assert spec.run_id
        loaded("spec")
    """)
    assert [m for m in steps["table"] if m.startswith("systems")] == ["systems", "systems.plugins"]
    assert [m for m in steps["names"] if m.startswith("systems")] == ["systems", "systems.plugins"]
    spec = set(steps["spec"])
    assert "systems.in_memory" in spec  # the system the spec names, to validate its options
    unnamed = [m for m in spec if m.startswith(("systems.disk", "systems.pyg_baseline", "systems.pipelined",
                                                 "systems.feature_cache", "systems.distributed", "experiments",
                                                 "simulators"))]
    assert unnamed == []
    other_plugins = {"systems.sampling.naive", "systems.sampling.dense", "systems.sampling.pyg", "systems.models.gat",
                     "systems.models.gcn", "systems.models.graphsage", "systems.models.decoders",
                     "systems.tasks.link_prediction"}
    assert other_plugins & spec == set()  # the packages import none of their plugins


@pytest.mark.parametrize("kind", sorted(REGISTRIES))
def test_every_table_line_is_declared_once_and_resolves(kind):
    table, known = getattr(plugins, kind.upper()), REGISTRIES[kind]
    assert plugins.TABLES[kind] is table and dict(plugin_table(kind)).items() >= table.items()
    for name, target in table.items():
        assert known.target(name) == target
        module, _, attribute = target.partition(":")
        assert known.get(name) is getattr(sys.modules[module], attribute)

