"""The Colab TPU notebook runs top to bottom on this CPU with SMOKE=True; it is committed clean."""

import json
import math
import os
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


@pytest.mark.subprocess
def test_notebook_runs_top_to_bottom_with_smoke(tmp_path):
    notebook = _read()
    workdir = tmp_path / "workdir"
    # As papermill does: a cell after the parameters cell overrides them.
    injected = nbformat.v4.new_code_cell(f"SMOKE = True\nWORKDIR = {str(workdir)!r}")
    notebook.cells.insert(_parameters_index(notebook) + 1, injected)
    client = nbclient.NotebookClient(
        notebook, timeout=300, kernel_name="python3", allow_errors=False,
        resources={"metadata": {"path": os.path.dirname(os.path.dirname(NOTEBOOK))}})
    # The kernel runs in this interpreter's environment (the venv with xlnet_tf installed).
    client.kernel_manager_class = _kernel_manager_for(sys.executable)
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as e:
        pytest.fail(f"notebook cell failed under SMOKE:\n{str(e)[-3000:]}")

    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert all(cell.execution_count is not None for cell in code)
    assert not [o for cell in code for o in cell.outputs if o.get("output_type") == "error"]
    text = _stream_text(code[-1])
    line = next(l for l in text.splitlines() if l.startswith(RESULT_PREFIX))
    result = json.loads(line[len(RESULT_PREFIX):])
    assert math.isfinite(result["pretrain_loss"]) and result["pretrain_loss"] > 0
    assert math.isfinite(result["finetune_loss"])
    assert result["export"].startswith(str(workdir))
    assert os.path.isfile(os.path.join(result["export"], "saved_model.pb"))
    assert os.path.isfile(os.path.join(workdir, "pretrain", "export", "preset", "config.json"))
    # The batch table lists the three TPU slices with the config's 256 split over 8 replicas.
    table = next(_stream_text(c) for c in code if "per-replica" in _stream_text(c))
    rows = {row.split()[0]: row.split() for row in table.splitlines()[1:] if row.strip()}
    for name in ("v2-8", "v3-8", "v5e-8"):
        # name, replicas, HBM, "GB", per-replica, global, fits, largest
        assert (rows[name][1], rows[name][4], rows[name][5]) == ("8", "32", "256"), table


def _kernel_manager_for(python):
    from jupyter_client.manager import KernelManager

    class InterpreterKernelManager(KernelManager):
        """Starts the IPython kernel with `python`, whatever kernelspecs are installed."""

        def format_kernel_cmd(self, extra_arguments=None):
            return [python, "-m", "ipykernel_launcher", "-f", self.connection_file]

    return InterpreterKernelManager
