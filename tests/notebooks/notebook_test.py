"""The Colab TPU notebook: runs top to bottom on this CPU with SMOKE=True on TensorFlow and on JAX, is committed
clean, imports only public names, has no URL outside `ALLOWED_URLS`, installs with the TPU guide's recipes."""

import ast
import importlib
import json
import math
import os
import re
import subprocess
import sys

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOK = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "notebooks",
                        "xlnet_tpu_colab.ipynb")
RESULT_PREFIX = "NOTEBOOK_RESULT "


def _read():
    return nbformat.read(NOTEBOOK, as_version=4)


def _parameters_index(notebook):
    return next(i for i, cell in enumerate(notebook.cells)
                if cell.cell_type == "code" and "parameters" in cell.metadata.get("tags", []))


def test_committed_notebook_has_no_outputs_and_smoke_off():
    notebook = _read()
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    dirty = [i for i, cell in enumerate(code) if cell.outputs or cell.execution_count is not None]
    assert not dirty, f"code cells {dirty} of {NOTEBOOK} have outputs; clear them before committing"
    parameters = notebook.cells[_parameters_index(notebook)]
    assert parameters is code[0], "the parameters cell must be the first code cell"
    assert "SMOKE = False" in parameters.source


def _stream_text(cell):
    return "".join(output.get("text", "") for output in cell.outputs
                   if output.get("output_type") == "stream")


def _execute_with_smoke(tmp_path, backend):
    """Executes the notebook with SMOKE on `backend`; returns its code cells, its result line and its workdir."""
    notebook = _read()
    workdir = tmp_path / "workdir"
    # As papermill does: a cell after the parameters cell overrides them.
    injected = nbformat.v4.new_code_cell(f"SMOKE = True\nBACKEND = {backend!r}\nWORKDIR = {str(workdir)!r}")
    notebook.cells.insert(_parameters_index(notebook) + 1, injected)
    client = nbclient.NotebookClient(
        notebook, timeout=600, kernel_name="python3", allow_errors=False,
        resources={"metadata": {"path": os.path.dirname(os.path.dirname(NOTEBOOK))}})
    # The kernel runs in this interpreter's environment (the venv with xlnet_tf installed).
    client.kernel_manager_class = _kernel_manager_for(sys.executable)
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as e:
        pytest.fail(f"notebook cell failed under SMOKE on {backend}:\n{str(e)[-3000:]}")

    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert all(cell.execution_count is not None for cell in code)
    assert not [o for cell in code for o in cell.outputs if o.get("output_type") == "error"]
    text = _stream_text(code[-1])
    line = next(row for row in text.splitlines() if row.startswith(RESULT_PREFIX))
    return code, json.loads(line[len(RESULT_PREFIX):]), workdir


def _check_smoke_run(code, result, workdir, backend):
    """What a SMOKE run gives on either backend: finite losses, the preset and the SavedModel, the batch table."""
    assert math.isfinite(result["pretrain_loss"]) and result["pretrain_loss"] > 0
    assert math.isfinite(result["finetune_loss"])
    assert result["replicas"] == 1  # One CPU device.
    assert result["export"].startswith(str(workdir))
    assert os.path.isfile(os.path.join(result["export"], "saved_model.pb"))
    assert os.path.isdir(os.path.join(result["export"], "variables"))
    assert os.path.isfile(os.path.join(workdir, "pretrain", "export", "preset", "config.json"))
    assert os.path.isfile(os.path.join(workdir, "pretrain", "export", "saved_model", "saved_model.pb"))
    # The batch table: the config's 256 on Colab's v5e-1 (one replica) and split over the 8 replicas
    # of the slices; the accumulation that fits the 1.45 GB/example estimate in each one's HBM.
    table = next(_stream_text(c) for c in code if "per-replica" in _stream_text(c))
    rows = {row.split()[0]: row.split() for row in table.splitlines()[1:] if row.strip()}
    assert next(iter(rows)) == "v5e-1"
    # name, replicas, HBM, "GB", per-replica, global, fits, largest, accumulation k
    assert rows["v5e-1"][1:] == ["1", "16", "GB", "256", "256", "no", "10", "32"], table
    for name, largest, k in (("v2-8", "4", "8"), ("v3-8", "10", "4"), ("v5e-8", "10", "4")):
        assert rows[name][1:] == ["8", rows[name][2], "GB", "32", "256", "no", largest, k], table
    # Both runs said where they trained: this backend, on the CPU.
    devices = [line for c in code for line in _stream_text(c).splitlines() if line.startswith("Devices: ")]
    assert len(devices) == 2, devices
    assert all(line.startswith(f"Devices: {backend}, ") and "this run trains on the CPU" in line
               for line in devices), devices


@pytest.mark.large
@pytest.mark.subprocess
def test_notebook_runs_top_to_bottom_with_smoke(tmp_path):
    code, result, workdir = _execute_with_smoke(tmp_path, "tensorflow")
    _check_smoke_run(code, result, workdir, "tensorflow")


@pytest.mark.large
@pytest.mark.subprocess
def test_notebook_runs_top_to_bottom_with_smoke_on_jax(tmp_path):
    code, result, workdir = _execute_with_smoke(tmp_path, "jax")
    _check_smoke_run(code, result, workdir, "jax")
    # The accelerator cell listed JAX's devices (the CPU here) and took their count as REPLICAS.
    assert any("CpuDevice" in _stream_text(c) for c in code)


# Every web address the notebook may show. None today: a notebook that cites a page names one
# that exists (checked when added here), never a repository or download that does not.
ALLOWED_URLS = frozenset()
TPU_GUIDE = os.path.join(os.path.dirname(NOTEBOOK), os.pardir, "docs", "guide", "tpu.md")
JAX_TPU_HEADING = "Install on a Colab or Kaggle TPU runtime: JAX (recommended)"
TENSORFLOW_TPU_HEADING = "Install with tensorflow-tpu (a TPU VM or a Colab TPU runtime)"


def _code(notebook):
    return [cell.source for cell in notebook.cells if cell.cell_type == "code"]


def _public_names(module):
    """`__all__` of `xlnet_tf` or of one of its direct subpackages; None for anything else."""
    if module != "xlnet_tf" and (module.count(".") != 1 or not module.startswith("xlnet_tf.")):
        return None
    imported = importlib.import_module(module)
    if not hasattr(imported, "__path__"):  # A module, not a package: private by the rule.
        return None
    return getattr(imported, "__all__", None)


def test_the_notebook_uses_only_public_names():
    uses = []  # (module, name); name None for a plain import
    for source in _code(_read()):
        tree = ast.parse(source)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                uses += [(alias.name, None) for alias in node.names if alias.name.startswith("xlnet_tf")]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("xlnet_tf"):
                uses += [(node.module, alias.name) for alias in node.names]
            elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                  and node.value.id == "xlnet_tf"):
                uses.append(("xlnet_tf", node.attr))
    assert ("xlnet_tf", "resolve_strategy") in uses and ("xlnet_tf", "run_pretraining") in uses
    private = []
    for module, name in uses:
        public = _public_names(module)
        if public is None or (name is None and module != "xlnet_tf") or (name and name not in public):
            private.append(f"{module}.{name}" if name else module)
    assert not private, f"not in xlnet_tf.__all__ or a subpackage's __all__: {private}"
    # Each public name resolves and documents itself with an example.
    for module, name in uses:
        if name:
            value = getattr(importlib.import_module(module), name)
            assert "Example" in (value.__doc__ or ""), f"{module}.{name} has no example"


def test_private_paths_are_refused_by_the_check():
    assert _public_names("xlnet_tf.training.strategy") is None  # A module below a subpackage.
    assert _public_names("xlnet_tf.serving") and "export_task_model" in _public_names("xlnet_tf.serving")
    assert _public_names("xlnet_tf.cli") is None  # No __all__: nothing public.


def test_every_url_in_the_notebook_is_an_allowed_one():
    text = "\n".join(cell.source for cell in _read().cells)
    urls = set(re.findall(r"\b[a-z][a-z0-9+.-]*://[^\s\"'`)]+", text))
    # gs:// paths are placeholders of the user's own bucket, not addresses to visit.
    assert {u for u in urls if not u.startswith("gs://")} <= ALLOWED_URLS


def _literal(name):
    """The literal value the notebook assigns to `name`."""
    for source in _code(_read()):
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
                return ast.literal_eval(node.value)
    raise AssertionError(f"the notebook assigns no {name}")


def test_batch_table_starts_with_v5e_1_and_keeps_the_8_device_slices():
    tpus = _literal("TPUS")
    assert tpus[0] == ("v5e-1", 1, 16)  # Colab's TPU: one chip, 16 GB.
    assert {name: replicas for name, replicas, _ in tpus[1:]} == {"v2-8": 8, "v3-8": 8, "v5e-8": 8}
    assert "Kaggle" in "\n".join(c.source for c in _read().cells if c.cell_type == "markdown")


def _guide_recipe(heading):
    """The first command of the first bash block under `heading` in the TPU guide."""
    with open(TPU_GUIDE, encoding="utf-8") as f:
        section = f.read().split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    recipe = section.split("```bash", 1)[1].split("```", 1)[0].strip().splitlines()[0]
    assert recipe.startswith("pip install ")
    return recipe


def test_tpu_pins_are_the_tpu_guides_recipe():
    assert _literal("TPU_PINS") == re.findall(r'"([^"]+==[^"]+)"', _guide_recipe(TENSORFLOW_TPU_HEADING))


def test_jax_tpu_pins_are_the_tpu_guides_jax_recipe():
    recipe = _guide_recipe(JAX_TPU_HEADING)
    assert _literal("JAX_TPU_PINS") == re.findall(r'"([^"]+==[^"]+)"', recipe)
    # The package with its beam extra only: the jax extra would bring JAX's CPU build over the runtime's.
    assert recipe.endswith('".[beam]"') and "jax" not in recipe


def _cell_with(name):
    return next(s for s in _code(_read()) if name in s)


def _install_cell():
    return _cell_with("TPU_PINS")


def _run_setup_and_install(monkeypatch, *, on_tpu, backend, install="/content/xlnet_tf-0.1.0-py3-none-any.whl"):
    """Runs the parameters, setup and install cells as the kernel would; returns pip's argument lists and the
    namespace. `subprocess.run` is recorded, never run; the environment is restored afterwards."""
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda args, check: calls.append(args[5:]))
    for name in ("TPU_ACCELERATOR_TYPE", "TPU_WORKER_ID"):
        monkeypatch.delenv(name, raising=False)
    if on_tpu:
        monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v5litepod-1")
    # The setup cell sets it: monkeypatch puts back what this process had.
    monkeypatch.setenv("KERAS_BACKEND", os.environ.get("KERAS_BACKEND", "tensorflow"))
    namespace = {}
    parameters = _read().cells[_parameters_index(_read())].source
    for source in (parameters, f"INSTALL = {install!r}\nBACKEND = {backend!r}", _cell_with("ON_TPU = "),
                   _install_cell()):
        exec(source, namespace)  # noqa: S102 - the notebook's own cells, as the kernel runs them
    return calls, namespace


@pytest.mark.parametrize("backend", ["jax", "tensorflow"])
@pytest.mark.parametrize("on_tpu", [True, False], ids=["tpu", "cpu_or_gpu"])
def test_install_runs_the_tpu_recipe_only_on_a_tpu(monkeypatch, on_tpu, backend):
    calls, namespace = _run_setup_and_install(monkeypatch, on_tpu=on_tpu, backend=backend)
    assert namespace["ON_TPU"] is on_tpu and os.environ["KERAS_BACKEND"] == backend
    wheel = "/content/xlnet_tf-0.1.0-py3-none-any.whl[beam]"
    pins = ["tensorflow-tpu==2.20.0", "libtpu==0.0.14", "tensorflow-text==2.20.1"]
    if on_tpu and backend == "jax":
        # TensorFlow's CPU wheels beside the runtime's JAX, and the wheel's [beam] only: no [jax] extra,
        # no JAX package, no tensorflow-tpu (which would claim the chips).
        assert calls == [["tensorflow==2.20.*", "tensorflow-text==2.20.*", wheel]]
        assert not [arg for args in calls for arg in args if "jax" in arg or "tpu" in arg]
    elif on_tpu:
        assert calls == [[*pins, wheel], ["--force-reinstall", "--no-deps", "tensorflow-tpu==2.20.0"]]
    else:
        assert calls == [[wheel]]


@pytest.mark.parametrize("jax, tensorflow, on_tpu, tensorflow_tpu, expected", [
    (True, False, True, False, "jax"),  # Colab's or Kaggle's TPU runtime as shipped.
    (True, False, False, False, "jax"),  # JAX alone, no TPU.
    (True, True, True, False, "jax"),  # A TPU after this notebook's JAX install (TensorFlow's CPU wheel).
    (True, True, True, True, "tensorflow"),  # A TPU after the tensorflow-tpu recipe.
    (True, True, False, False, "tensorflow"),  # A CPU or GPU machine with both.
    (False, True, True, True, "tensorflow"),
], ids=["tpu_runtime", "jax_only", "tpu_after_jax_install", "tpu_after_tf_recipe", "cpu_both", "no_jax"])
def test_auto_backend(monkeypatch, jax, tensorflow, on_tpu, tensorflow_tpu, expected):
    import importlib.metadata
    import importlib.util

    present = {"jax": jax, "tensorflow": tensorflow}
    real_find_spec, real_version = importlib.util.find_spec, importlib.metadata.version

    def find_spec(name, *args):
        if name in present:
            return real_find_spec("os") if present[name] else None
        return real_find_spec(name, *args)

    def version(distribution):
        if distribution == "tensorflow-tpu":
            if tensorflow_tpu:
                return "2.20.0"
            raise importlib.metadata.PackageNotFoundError(distribution)
        return real_version(distribution)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    monkeypatch.setattr(importlib.metadata, "version", version)
    calls, namespace = _run_setup_and_install(monkeypatch, on_tpu=on_tpu, backend="auto", install="")
    assert namespace["BACKEND"] == expected and os.environ["KERAS_BACKEND"] == expected
    assert calls == []  # xlnet_tf is installed and INSTALL is empty: nothing to install.


def test_an_unknown_backend_is_one_clear_message(monkeypatch):
    with pytest.raises(ValueError, match=r'^BACKEND must be "jax", "tensorflow" or "auto", got \'torch\'\.$'):
        _run_setup_and_install(monkeypatch, on_tpu=False, backend="torch")


def test_install_without_a_source_is_one_clear_message(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "xlnet_tf" else real(name, *a))
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("nothing to install"))
    with pytest.raises(ValueError, match=r"^INSTALL is empty and xlnet_tf is not installed: set INSTALL "
                       r"\(first code cell\) to the path of an xlnet_tf wheel"):
        _run_setup_and_install(monkeypatch, on_tpu=False, backend="tensorflow", install="")


def _kernel_manager_for(python):
    from jupyter_client.manager import KernelManager

    class InterpreterKernelManager(KernelManager):
        """Starts the IPython kernel with `python`, whatever kernelspecs are installed."""

        def format_kernel_cmd(self, extra_arguments=None):
            return [python, "-m", "ipykernel_launcher", "-f", self.connection_file]

    return InterpreterKernelManager
