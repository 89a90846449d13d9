"""The probes of each comparison module, run once per backend per pytest run.

A comparison module `<group>_backend_test.py` reads the outputs of `probes/<group>_probes.py` (its own
probes only, so the groups run independently). Running a group means fresh processes per backend (minutes
on 2 cores), so these are `large` tests, and each module's tests share one `xdist_group`: with
`--dist loadgroup` (setup.cfg) one pytest-xdist worker runs the whole group while the other runs other
tests. A file lock in the pytest run's common temporary folder keeps that true under any other distribution.
"""

import os

import pytest

# Comparison module -> its probe module in tests/backends/probes/.
PROBE_MODULES = {
    "backbone_backend_test": "backbone_probes",
    "generation_backend_test": "generation_probes",
    "hf_parity_backend_test": "hf_parity_probes",
    "layers_backend_test": "layers_probes",
    "optimizers_backend_test": "optimizer_probes",
    "tasks_backend_test": "tasks_probes",
}


def _module_name(node):
    return node.module.__name__.rsplit(".", 1)[-1]


def pytest_collection_modifyitems(items):
    for item in items:
        group = PROBE_MODULES.get(_module_name(item))
        if group is not None:
            item.add_marker(pytest.mark.large)
            item.add_marker(pytest.mark.xdist_group(f"backends-{group}"))


@pytest.fixture(scope="session")
def _probe_outputs_by_group():
    return {}


@pytest.fixture
def backend_outputs(request, tmp_path_factory, _probe_outputs_by_group):
    """`{backend: {"probe.key": array}}` of this module's probes on TensorFlow, JAX and PyTorch (installed)."""
    from tests.backends.backend_harness import shared_backend_outputs

    group = PROBE_MODULES[_module_name(request)]
    if group not in _probe_outputs_by_group:
        # Under pytest-xdist the parent of a worker's base temporary folder is this run's, common to its workers;
        # without xdist the base folder is the run's own (its parent is shared by every run: stale outputs).
        root = tmp_path_factory.getbasetemp()
        if os.environ.get("PYTEST_XDIST_WORKER"):
            root = root.parent
        workdir = root / "backend-probes" / group
        _probe_outputs_by_group[group] = shared_backend_outputs(workdir, probe_module=group)
    return _probe_outputs_by_group[group]
