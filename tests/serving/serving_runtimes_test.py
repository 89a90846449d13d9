"""`tools/check_serving_runtimes.py`: SavedModels exported here load and answer the same in older runtimes.

The check against a real older TensorFlow runs when `XLNET_TF_SERVING_RUNTIME_PYTHON` names the python of
a venv holding `tensorflow==X.*` + `tensorflow-text==X.*` (CI makes one with 2.15, the newest TensorFlow of
Vertex AI's prebuilt prediction containers); the default suite checks the tool itself against this
process's own TensorFlow and a runtime without tensorflow-text.
"""

import importlib.util
import os
import stat
import sys

import numpy as np
import pytest

RUNTIME_PYTHON = os.environ.get("XLNET_TF_SERVING_RUNTIME_PYTHON")
TOOL = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "check_serving_runtimes.py")


def _tool():
    spec = importlib.util.spec_from_file_location("check_serving_runtimes", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tool = _tool()


def test_failure_reason_names_the_missing_op_attribute_or_wheel():
    assert tool.failure_reason(
        "tensorflow.python.framework.errors_impl.NotFoundError: Op type not registered 'SentencepieceOp' in "
        "binary running on host. Make sure the Op and Kernel are registered in the binary running in this "
        "process.") == "op SentencepieceOp not registered"
    assert tool.failure_reason(
        "ValueError: NodeDef mentions attr 'grad_a' not in Op<name=BatchMatMulV3; signature=x:Ta, y:Tb -> "
        "output:Tout>; NodeDef: {{node MatMul}}") == "attr grad_a of op BatchMatMulV3 unknown"
    assert tool.failure_reason(
        "ERROR: Could not find a version that satisfies the requirement tensorflow-text==2.13.* (from versions: "
        "2.12.0, 2.12.1)\nERROR: No matching distribution found for tensorflow-text==2.13.*\n"
    ) == "no wheel of tensorflow-text==2.13.* for this Python"
    assert tool.failure_reason("Traceback ...\n  File x\nRuntimeError: boom\n") == "RuntimeError: boom"
    assert tool.failure_reason("Traceback ...\nImportError: numpy.core.umath failed to import\n() -> handle\n") == (
        "ImportError: numpy.core.umath failed to import")


def test_compare_outputs_floats_within_tolerance_ints_and_strings_exactly():
    expected = {"p": np.array([0.25, 0.75], np.float32), "label": np.array([1], np.int32),
                "name": np.array([b"a"])}
    same = {"p": np.array([0.25 + 4e-6, 0.75], np.float32), "label": np.array([1], np.int32),
            "name": np.array([b"a"])}
    equal, difference = tool.compare_outputs(expected, same)
    assert equal and 3e-6 < difference < 5e-6
    assert tool.compare_outputs(expected, {**same, "p": np.array([0.25, 0.76], np.float32)})[0] is False
    assert tool.compare_outputs(expected, {**same, "label": np.array([0], np.int32)}) == (False, float("inf"))
    assert tool.compare_outputs(expected, {**same, "name": np.array([b"b"])}) == (False, float("inf"))
    assert tool.compare_outputs(expected, {"p": same["p"]}) == (False, float("inf"))
    assert tool.compare_outputs(expected, {**same, "p": np.array([0.25], np.float32)}) == (False, float("inf"))
    assert tool.compare_outputs(expected, {**same, "p": np.array([np.nan, 0.75], np.float32)})[0] is False


def test_a_bfloat16_export_is_compared_to_bfloat16_precision_and_a_near_tie_may_pick_either_label():
    assert tool.output_tolerance({"dtype": "bfloat16"}) == tool.BFLOAT16_RUNTIME_TOLERANCE
    assert tool.output_tolerance({"jit_compile": True}) == tool.TOLERANCE
    # Seen between TensorFlow 2.15 and 2.21: logits a few bfloat16 units apart.
    expected = {"logits": np.array([[-1.1015625, -0.58203125, -0.59375], [-0.41601562, -0.625, -0.3203125]],
                                   np.float32),
                "label": np.array([1, 2], np.int32), "label_name": np.array([b"neutral", b"entailment"])}
    rounded = {"logits": np.array([[-1.1171875, -0.59765625, -0.578125], [-0.40625, -0.6171875, -0.328125]],
                                  np.float32),
               "label": np.array([2, 2], np.int32), "label_name": np.array([b"entailment", b"entailment"])}
    assert tool.compare_outputs(expected, rounded)[0] is False
    # Row 0 is a near tie (0.012 apart): its label may flip; row 1 (0.096 apart) must not.
    equal, difference = tool.compare_outputs(expected, rounded, tool.BFLOAT16_RUNTIME_TOLERANCE)
    assert equal and difference == 0.015625
    flipped = {**rounded, "label": np.array([2, 0], np.int32)}
    assert tool.compare_outputs(expected, flipped, tool.BFLOAT16_RUNTIME_TOLERANCE) == (False, float("inf"))
    # Relative above magnitude 1: 0.1 off at 4.0 is 2.5% (within), 0.1 off at 0.5 is not.
    assert tool.compare_outputs({"p": np.array([4.0])}, {"p": np.array([4.1])}, tool.BFLOAT16_RUNTIME_TOLERANCE)[0]
    assert not tool.compare_outputs({"p": np.array([0.5])}, {"p": np.array([0.6])}, tool.BFLOAT16_RUNTIME_TOLERANCE)[0]


def test_a_runtime_without_its_python_is_a_row_with_the_reason(tmp_path):
    python, reason = tool.runtime_venv(str(tmp_path), "2.15", "3.99", log=lambda message: None)
    assert python is None and reason == "no Python 3.99 on this machine"
    assert not os.path.exists(tmp_path / "tf-2.15-py3.99")
    rows = [{"runtime": "TensorFlow 2.15.*", "python_version": "3.99",
             "error": f"does not install on Python 3.99: {reason}"}]
    assert tool.markdown_table(tool.table_rows(rows, {"classifier": {}})).splitlines()[2] == (
        "| TensorFlow 2.15.* | 3.99 | no | - | - | not run: does not install on Python 3.99: "
        "no Python 3.99 on this machine |")


def test_problems_are_grouped_by_reason():
    assert tool._grouped(["a: op X not registered", "b/serving_default: op X not registered", "c: boom"]) == [
        "op X not registered (a, b/serving_default)", "boom (c)"]


def test_a_made_venv_is_reused(tmp_path):
    venv = tmp_path / "tf-2.15-py3.11"
    venv.mkdir()
    (venv / tool.INSTALLED_MARKER).write_text("made\n")
    assert tool.runtime_venv(str(tmp_path), "2.15", "3.11", log=None) == (str(venv / "bin" / "python"), None)


def test_a_runtime_python_that_does_not_run_is_a_row_with_the_reason(tmp_path):
    row = tool.check_runtime(str(tmp_path / "no-python"), str(tmp_path), {"classifier": {}}, str(tmp_path / "run"))
    assert row["error"] == f"cannot run {tmp_path / 'no-python'}: No such file or directory"
    assert (row["loaded"], row["equal"]) == (0, 0)


def test_usage_errors_name_the_option(capsys):
    assert tool.main(["--runtimes", "2"]) == 2
    assert "runtime '2' is not MAJOR.MINOR[@PYTHON_MAJOR.MINOR]" in capsys.readouterr().err
    assert tool.main(["--runtimes", "--runtime-python", "/no/such/python"]) == 2
    assert "--runtime-python '/no/such/python' is not a file" in capsys.readouterr().err


@pytest.fixture(scope="module")
def classifier_case(tmp_path_factory):
    directory = tmp_path_factory.mktemp("runtime-cases")
    return str(directory), tool.export_cases(str(directory), ["classifier"])


@pytest.mark.subprocess
def test_this_runtime_loads_the_export_with_equal_outputs(classifier_case, tmp_path):
    import tensorflow as tf

    directory, cases = classifier_case
    row = tool.check_runtime(sys.executable, directory, cases, str(tmp_path / "run"))
    assert row["error"] is None and row["problems"] == []
    assert (row["loaded"], row["equal"], row["max_diff"]) == (1, 1, 0.0)
    assert row["tensorflow"] == tf.__version__


@pytest.mark.subprocess
def test_a_runtime_without_tensorflow_text_reports_the_missing_op(classifier_case, tmp_path):
    # A tensorflow_text that registers nothing: the strings-in signature's ops are missing at load.
    fake = tmp_path / "fake"
    (fake / "tensorflow_text").mkdir(parents=True)
    (fake / "tensorflow_text" / "__init__.py").write_text("__version__ = 'none'\n")
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\nPYTHONPATH={fake} exec {sys.executable} \"$@\"\n")
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    directory, cases = classifier_case
    row = tool.check_runtime(str(python), directory, cases, str(tmp_path / "run"))
    assert (row["loaded"], row["equal"], row["tensorflow_text"]) == (0, 0, "none")
    assert len(row["problems"]) == 1
    assert row["problems"][0].startswith("classifier: op ") and row["problems"][0].endswith(" not registered")
    lines = tool.table_rows([{**row, "runtime": "x", "python_version": "3.11"}], cases)
    reason = row["problems"][0].split(": ", 1)[1]
    assert lines[1][2:5] == ["0/1", "0/1", "-"]
    assert lines[1][5] == f"classifier: serving_default + serve_token_ids; {reason} (classifier)"


@pytest.mark.subprocess
@pytest.mark.slow
@pytest.mark.skipif(not RUNTIME_PYTHON, reason="XLNET_TF_SERVING_RUNTIME_PYTHON names no older runtime")
def test_an_older_runtime_loads_every_export_with_equal_outputs(tmp_path):
    import tensorflow as tf

    cases = tool.export_cases(str(tmp_path / "cases"))
    assert sorted(cases) == sorted(tool.MODELS)
    row = tool.check_runtime(RUNTIME_PYTHON, str(tmp_path / "cases"), cases, str(tmp_path / "run"))
    print(tool.markdown_table(tool.table_rows([{**row, "runtime": RUNTIME_PYTHON, "python_version": "?"}], cases)))
    assert row["error"] is None, row["error"]
    assert row["problems"] == []
    assert row["loaded"] == row["equal"] == len(tool.MODELS)
    older = [int(part) for part in row["tensorflow"].split(".")[:2]]
    assert older < [int(part) for part in tf.__version__.split(".")[:2]], row["tensorflow"]
