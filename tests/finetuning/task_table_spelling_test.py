"""Task types are spelled once: no task-type string literal in code outside the names of the
task types (`xlnet_tf/tasks/task_kinds.py`).

Paths look a task type up in the table and read its entry (layout, evaluation, labels, model class);
comparing names would let one path learn a new task while another still refuses it. Docstrings may
name task types (they document the spelling users type); code may not.
"""

import ast
import pathlib

from xlnet_tf import tasks

ROOT = pathlib.Path(__file__).resolve().parents[2]
TABLE = ROOT / "xlnet_tf" / "tasks" / "task_kinds.py"


def _docstring_nodes(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = getattr(node, "body", [])
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                yield body[0].value


def _task_literals(path):
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    docstrings = {id(node) for node in _docstring_nodes(tree)}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in tasks.TASKS
                and id(node) not in docstrings):
            yield node.lineno, node.value


def test_no_task_type_literal_outside_the_table():
    files = [path for folder in ("xlnet_tf", "pipelines") for path in (ROOT / folder).rglob("*.py") if path != TABLE]
    found = [f"{path.relative_to(ROOT)}:{line}: {value!r}" for path in files for line, value in _task_literals(path)]
    assert not found, "look task types up in xlnet_tf.tasks instead:\n" + "\n".join(found)


def test_the_scan_sees_a_literal(tmp_path):
    # The rule has teeth: a comparison in code is found, the same word in a docstring is not.
    source = tmp_path / "probe.py"
    source.write_text('"""About span tasks: "span"."""\n\nIS_SPAN = lambda task: task.task_type == "span"\n')
    assert list(_task_literals(source)) == [(3, "span")]


def test_every_entry_names_its_classes():
    for name, entry in tasks.TASKS.items():
        model = entry.model_class()
        assert model.preprocessor_cls is entry.preprocessor_class() is not None, name
        assert tasks.of_model_class_name(model.__name__, 1 if entry.score_labels else 2) is entry, name
