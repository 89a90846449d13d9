"""The import rules of the package, checked on the source (every `import`, also inside functions).

- `models/` and `layers/` never import the runs, the CLI, export or the Beam jobs;
- `storage/` (files, presets on disk) and `formats/` sit below everything else;
- the training engine and the runs (`training/`, `pretraining/`, `finetuning/`) never import `cli/`;
- no circle of imports between modules, nor between folders (a folder's `__init__` runs first);
- nothing imports keras-hub's private modules (`keras_hub.src`), only its public API;
- imports sit at the top of their module. An import inside a function is kept only for an optional
  dependency or for the import time of a light entry point (the CLI's `--help`, Beam workers), and
  says so in a comment on its line or the line above; there are fewer than `MAX_FUNCTION_IMPORTS`.
  A backend's own framework (`tensorflow`, `jax`, `torch`) imported inside a function of the model
  path is that backend's branch, which the next rule asks for, and is counted apart;
- the model path (the package `__init__`, `layers/`, `models/`, `samplers/`, `optimizers/`, and every
  module they import at module level) never imports TensorFlow at module level, so it imports where
  TensorFlow is not installed (JAX, PyTorch); a data-side module it reaches takes `tf` from
  `xlnet_tf.tensorflow_required`, which stands in for a missing TensorFlow with a one-line error.

Imports are read with `ast`, so nothing is imported to check them; an import inside a
function counts like one at the top, since it runs as soon as that function does, and so
does `importlib.import_module("a.literal.name")`.
"""

import ast
import os
import re

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "xlnet_tf"

# (importing package, forbidden prefixes, why)
RULES = [
    ("xlnet_tf.models", ("xlnet_tf.training", "xlnet_tf.pretraining", "xlnet_tf.finetuning",
                         "xlnet_tf.cli", "xlnet_tf.serving", "xlnet_tf.beam", "pipelines"),
     "models are the core: runs, export, CLI and Beam jobs build on them, never the reverse"),
    ("xlnet_tf.layers", ("xlnet_tf.training", "xlnet_tf.pretraining", "xlnet_tf.finetuning",
                         "xlnet_tf.cli", "xlnet_tf.serving", "xlnet_tf.beam", "pipelines",
                         "xlnet_tf.models"),
     "layers are the bottom of the model stack"),
    ("xlnet_tf.storage", ("xlnet_tf.models", "xlnet_tf.layers", "xlnet_tf.preprocessing", "xlnet_tf.data",
                          "xlnet_tf.training", "xlnet_tf.pretraining", "xlnet_tf.finetuning", "xlnet_tf.cli",
                          "xlnet_tf.serving", "xlnet_tf.beam", "xlnet_tf.presets", "xlnet_tf.convert"),
     "storage reads and writes files and presets for every layer above it"),
    ("xlnet_tf.training", ("xlnet_tf.cli", "xlnet_tf.pretraining", "xlnet_tf.finetuning"),
     "the engine serves both runs and is driven by the CLI"),
    ("xlnet_tf.pretraining", ("xlnet_tf.cli",), "a run is a library function the CLI calls"),
    ("xlnet_tf.finetuning", ("xlnet_tf.cli",), "a run is a library function the CLI calls"),
]


def _module_files():
    """`{dotted module name: path}` of every module of the package."""
    modules = {}
    for root, dirs, files in os.walk(os.path.join(REPO, PACKAGE)):
        dirs[:] = [d for d in dirs if not d.startswith((".", "__pycache__"))]
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(root, name)
            dotted = os.path.relpath(path, REPO)[:-3].replace(os.sep, ".")
            if dotted.endswith(".__init__"):
                dotted = dotted[:-len(".__init__")]
            modules[dotted] = path
    return modules


def _imports(module, path, known):
    """`{imported module: first line}` of `module` (absolute and relative, at any depth)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    found = {}
    for node in ast.walk(tree):
        if _is_import_module_call(node):
            targets = [node.args[0].value]
        elif isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _from_import_base(node, package)
            # `from pkg import submodule` imports the submodule; `from mod import name` the module.
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                       for alias in node.names]
        else:
            continue
        for target in targets:
            found.setdefault(target, node.lineno)
    return found


def _is_import_module_call(node):
    """Whether `node` is `importlib.import_module("literal")` (or `import_module("literal")`)."""
    if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)):
        return False
    function = node.func
    return (isinstance(function, ast.Attribute) and function.attr == "import_module"
            and isinstance(function.value, ast.Name) and function.value.id == "importlib") or (
        isinstance(function, ast.Name) and function.id == "import_module")


def _graph():
    modules = _module_files()
    return {m: _imports(m, path, modules) for m, path in modules.items()}, modules


def _under(name, prefix):
    return name == prefix or name.startswith(prefix + ".")


def test_no_import_breaks_a_layering_rule():
    graph, modules = _graph()
    broken = []
    for source, imports in sorted(graph.items()):
        for package, forbidden, why in RULES:
            if not _under(source, package):
                continue
            for target, line in sorted(imports.items()):
                if any(_under(target, prefix) for prefix in forbidden):
                    broken.append(f"{os.path.relpath(modules[source], REPO)}:{line} imports "
                                  f"{target} ({package} must not: {why})")
    assert not broken, "\n".join(broken)


def _find_cycles(graph):
    """One circle of imports per group of modules that import each other, each a list `[a, ..., a]`."""
    edges = {m: sorted(t for t in imports if t in graph and t != m) for m, imports in graph.items()}
    # Tarjan's strongly connected components, iteratively (no recursion limit on a deep graph).
    index, low, on_stack, stack, groups = {}, {}, set(), [], []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.add(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(group)
            elif target not in index:
                index[target] = low[target] = len(index)
                stack.append(target)
                on_stack.add(target)
                work.append((target, iter(edges[target])))
            elif target in on_stack:
                low[node] = min(low[node], index[target])
    return [_cycle_in(sorted(group)[0], group, edges) for group in sorted(groups, key=sorted)]


def _cycle_in(start, group, edges):
    """The shortest circle from `start` back to itself inside `group` (breadth-first)."""
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for target in edges[node]:
            if target == start:
                return paths[node] + [start]
            if target in group and target not in paths:
                paths[target] = paths[node] + [target]
                queue.append(target)
    raise AssertionError(f"no circle through {start}")


def test_no_circle_of_imports():
    graph, modules = _graph()
    cycles = _find_cycles(graph)
    assert not cycles, "Circles of imports:\n" + "\n".join(
        " -> ".join(f"{name} ({os.path.relpath(modules[name], REPO)}:{graph[name][nxt]})"
                    for name, nxt in zip(cycle, cycle[1:])) + f" -> {cycle[-1]}"
        for cycle in cycles)


def test_no_circle_of_imports_between_folders():
    """Importing `xlnet_tf.a.x` runs `xlnet_tf/a/__init__.py` first, so folders must not import each other."""
    graph, modules = _graph()

    def folder(name):
        return ".".join(name.split(".")[:2])

    edges, witness = {}, {}
    for source, imports in graph.items():
        edges.setdefault(folder(source), {})
        for target in imports:
            if _under(target, PACKAGE) and target != PACKAGE and folder(target) != folder(source):
                edges[folder(source)].setdefault(folder(target), 1)
                edges.setdefault(folder(target), {})
                witness.setdefault((folder(source), folder(target)),
                                   f"{os.path.relpath(modules[source], REPO)}:{imports[target]}")
    cycles = _find_cycles(edges)
    assert not cycles, "Circles of imports between folders:\n" + "\n".join(
        " -> ".join(f"{a} ({witness[a, b]})" for a, b in zip(cycle, cycle[1:])) + f" -> {cycle[-1]}"
        for cycle in cycles)


@pytest.mark.parametrize("graph, cycles", [
    ({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 3}}, [["a", "b", "c", "a"]]),
    ({"a": {"b": 1}, "b": {}, "c": {"a": 1}}, []),
    ({"a": {"b": 1}, "b": {"a": 1}, "c": {"d": 1}, "d": {"c": 1, "a": 1}}, [["a", "b", "a"], ["c", "d", "c"]]),
])
def test_the_cycle_finder_reports_every_circle(graph, cycles):
    assert _find_cycles(graph) == cycles


def test_importlib_calls_with_a_literal_count_as_imports(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("import importlib\n\ndef f(name):\n"
                      "    importlib.import_module('xlnet_tf.cli.main')\n"
                      "    return importlib.import_module(name)\n")
    assert _imports("m", str(module), {}) == {"importlib": 1, "xlnet_tf.cli.main": 4}


def _python_files(*folders):
    for folder in folders:
        for root, dirs, files in os.walk(os.path.join(REPO, folder)):
            dirs[:] = [d for d in dirs if not d.startswith((".", "__pycache__"))]
            yield from (os.path.join(root, name) for name in sorted(files) if name.endswith(".py"))


def test_nothing_imports_keras_hubs_private_modules():
    private = []
    for path in _python_files(PACKAGE, "pipelines"):
        module = os.path.relpath(path, REPO)[:-3].replace(os.sep, ".")
        for target, line in _imports(module, path, {}).items():
            if _under(target, "keras_hub.src"):
                private.append(f"{os.path.relpath(path, REPO)}:{line} imports {target}")
    assert not private, "\n".join(private)


# The in-function imports a reader may meet, at most; each needs its reason. The training engine's
# per-backend branches count here; the model path's backend branches (`_is_backend_branch`) do not.
MAX_FUNCTION_IMPORTS = 100
REASON = re.compile(r"#.*\b(import time|optional dependency)\b")
# The model path: what `import xlnet_tf` and the model classes load, TensorFlow installed or not.
MODEL_PATH = ("xlnet_tf.layers", "xlnet_tf.models", "xlnet_tf.samplers", "xlnet_tf.optimizers")
TENSORFLOW = ("tensorflow", "tensorflow_text", "tensorflow_datasets")
BACKEND_IMPORT = re.compile(r"(import|from)\s+(tensorflow|jax|torch)\b")


def function_imports(path):
    """`[(line number, source line, lines that may give its reason)]` of the imports inside functions of `path`.

    The lines that may give the reason: the import's own lines and the line above when that is a comment.
    """
    with open(path, encoding="utf-8") as f:
        source = f.read()
    lines = source.splitlines()
    found = {}
    for function in ast.walk(ast.parse(source, filename=path)):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(function):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    above = lines[node.lineno - 2].strip()
                    context = lines[node.lineno - 1:node.end_lineno] + ([above] if above.startswith("#") else [])
                    found[node.lineno] = (node.lineno, lines[node.lineno - 1], context)
    return [found[line] for line in sorted(found)]


def _is_backend_branch(path, text):
    """Whether an in-function import is a backend's framework inside the model path (its backend's branch)."""
    module = os.path.relpath(path, REPO)[:-3].replace(os.sep, ".")
    return (any(_under(module, prefix) for prefix in MODEL_PATH)
            and BACKEND_IMPORT.match(text.strip()) is not None)


def test_imports_inside_functions_are_few_and_each_gives_its_reason():
    imports = [(os.path.relpath(path, REPO), *found) for path in _python_files(PACKAGE)
               for found in function_imports(path) if not _is_backend_branch(path, found[1])]
    unexplained = [f"{path}:{line}: {text.strip()}" for path, line, text, context in imports
                   if not any(REASON.search(candidate) for candidate in context)]
    assert not unexplained, ("An import inside a function needs a comment on its line or the line above "
                             "saying why (`# optional dependency: ...` or `# import time: ...`); otherwise "
                             "move it to the top of the module:\n" + "\n".join(unexplained))
    assert len(imports) < MAX_FUNCTION_IMPORTS, "\n".join(f"{p}:{n}" for p, n, _, _ in imports)


def test_the_function_import_scan_reads_lines_and_reasons(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("import os\n\ndef f():\n    # import time: light\n    import json\n"
                      "    import csv  # optional dependency: none\n    import io\n    return os\n")
    assert [(line, reason) for line, _, context in function_imports(str(module))
            for reason in [any(REASON.search(c) for c in context)]] == [(5, True), (6, True), (7, False)]


def module_level_imports(module, path, known):
    """`{imported module: line}` of the imports `module` runs when imported (function bodies left out)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    found = {}

    def visit(nodes):
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                # One statement at a time through `_imports`' resolution of relative and submodule names.
                single = ast.Module(body=[node], type_ignores=[])
                for target in _resolve(module, path, single, known):
                    found.setdefault(target, node.lineno)
                continue
            for field in ("body", "orelse", "finalbody", "handlers"):
                children = getattr(node, field, None)
                if isinstance(children, list):
                    visit(children)

    visit(tree.body)
    return found


def _from_import_base(node, package):
    """The absolute module a `from ... import` statement in `package` reads from (relative levels resolved)."""
    base = node.module or ""
    if node.level:
        parts = package.split(".")
        parts = parts[:len(parts) - node.level + 1]
        base = ".".join(parts + ([base] if base else []))
    return base


def _resolve(module, path, tree, known):
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _from_import_base(node, package)
            yield from (f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names)


def model_path_closure(modules):
    """`{module: the module that imports it}` of every module the model path loads at import (roots: None)."""
    roots = [PACKAGE] + sorted(m for m in modules if any(_under(m, prefix) for prefix in MODEL_PATH))
    reached, stack = {}, [(root, None) for root in reversed(roots)]
    while stack:
        module, importer = stack.pop()
        if module in reached or module not in modules:
            continue
        reached[module] = importer
        parents = [".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 1)]
        targets = parents + sorted(module_level_imports(module, modules[module], modules))
        stack.extend((target, module) for target in reversed(targets) if target not in reached)
    return reached


def test_the_model_path_imports_no_tensorflow_at_module_level():
    """`import xlnet_tf` and the model classes work without TensorFlow (keras-hub's rule): checked on the source."""
    modules = _module_files()
    reached = model_path_closure(modules)
    broken = []
    for module in sorted(reached):
        for target, line in sorted(module_level_imports(module, modules[module], modules).items()):
            if target.split(".")[0] in TENSORFLOW:
                chain, step = [], module
                while reached[step] is not None:
                    chain.append(reached[step])
                    step = reached[step]
                via = f" (reached through {' <- '.join(chain)})" if chain else ""
                broken.append(f"{os.path.relpath(modules[module], REPO)}:{line} imports {target} at module "
                              f"level{via}")
    assert not broken, ("The model path must import without TensorFlow: import it inside the TensorFlow "
                        "branch of a function, or (data side) take `tf` from xlnet_tf.tensorflow_required:\n"
                        + "\n".join(broken))


def test_the_module_level_scan_skips_function_bodies_and_follows_the_model_path(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("import os\ntry:\n    import tensorflow as tf\nexcept ImportError:\n    tf = None\n\n"
                      "class A:\n    import json\n\n    def f(self):\n        import torch\n")
    assert module_level_imports("m", str(module), {}) == {"os": 1, "tensorflow": 3, "json": 8}
    assert "xlnet_tf.models.xlnet_backbone" in model_path_closure(_module_files())
    assert "xlnet_tf.storage.preset_io" in model_path_closure(_module_files())
