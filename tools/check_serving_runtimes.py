"""Checks that SavedModels exported with this TensorFlow load and answer the same in older serving runtimes.

Users serve on TensorFlow Serving images and on Vertex AI, whose prebuilt TensorFlow prediction containers
stop at 2.15, while `xlnet-tf export` runs on today's TensorFlow. This script:

1. exports tiny models with the project's own export code (`export_task_workdir`, what
   `xlnet-tf export --workdir` runs): a pair classifier, a span (SQuAD) model, a long-document classifier
   (its in-graph `tf.while_loop` over segments), the classifier in bfloat16 and the classifier with
   `jit_compile`; and records the outputs of both signatures (`serving_default` on strings,
   `serve_token_ids` on ids) on fixed inputs, in this process;
2. for each older runtime, creates (or reuses, under `--cache-dir`) a virtual environment with
   `tensorflow==X.*` and `tensorflow-text==X.*` only (no xlnet_tf), loads every SavedModel there in a
   subprocess, runs both signatures on the same inputs and compares the outputs (floats within 1e-5 of
   the expected value, or 2^-5 for the bfloat16 export, relative above magnitude 1; ints and strings equal,
   except a label where the expected logits' top two are closer than twice that tolerance);
3. prints a table (runtime, Python, loads, outputs equal, max diff, what was run) and with `--markdown FILE`
   writes it as markdown. A runtime that does not install on the chosen Python, or cannot load an export,
   is a row with the reason (the op or attribute it lacks), not a crash.

Example:
    PYTHONPATH=. python tools/check_serving_runtimes.py --runtimes 2.15 2.17 2.19 \
        --cache-dir /tmp/serving-runtimes --markdown /tmp/runtimes.md
    python tools/check_serving_runtimes.py --runtime-python /path/to/tf215-venv/bin/python

The same file runs inside each runtime's venv as `python check_serving_runtimes.py --load CASES OUT`:
that mode imports only TensorFlow, tensorflow-text and numpy. Exit status: 0 when every runtime loads
every export with equal outputs, 1 otherwise, 2 on usage errors.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

TOLERANCE = 1e-5
# bfloat16 keeps 8 significant bits (2^-7 apart at 1): two runtimes' kernels round and accumulate in other
# orders, so a bfloat16 export agrees across runtimes to a few units in the last place, not to float32's.
# 4 units at 1; seen: up to 0.0156 (TensorFlow 2.15 against 2.21 on a CPU without AVX-512).
BFLOAT16_RUNTIME_TOLERANCE = 2.0 ** -5
DEFAULT_RUNTIMES = ("2.15", "2.16", "2.17", "2.18", "2.19")
MODELS = ("classifier", "span", "long_document", "classifier_bfloat16", "classifier_jit")
SIGNATURES = ("serving_default", "serve_token_ids")
CASES_FILE = "cases.json"
INSTALLED_MARKER = ".installed"
INSTALL_TIMEOUT = 1800
LOAD_TIMEOUT = 900
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCABULARY = os.path.join(ROOT, "tests", "testdata", "tiny_spiece.model")

TEXTS = ["A man plays a guitar on the stage tonight.", "", "Rain.",
         "the quick brown fox jumps over the lazy dog near the river bank " * 4]
PAIRS = ["Someone makes music.", "Nothing at all.", "", "A fox."]
PASSAGES = ["The quick brown fox jumps over the lazy dog near the river bank in the morning while birds sing.",
            "Short one.", ""]
QUESTIONS = ["Who jumps?", "What?", "Nothing here?"]
DOCUMENTS = ["the farmer walks to the old mill with his two dogs " * 3, "a short one",
             "birds sing in the morning " * 6]


# -- in the older runtime: load and run (TensorFlow, tensorflow-text and numpy only) -----------------

def failure_reason(message):
    """The op or attribute a runtime lacks, from a load or call error; else the error's first line.

    Example:
    >>> failure_reason("... Op type not registered 'FooOp' in binary running on host ...")
    'op FooOp not registered'
    """
    found = re.search(r"Op type not registered '([^']+)'", message)
    if found:
        return f"op {found.group(1)} not registered"
    found = re.search(r"NodeDef mentions attrs? '([^']+)' not in Op<name=([^;>]+)", message)
    if found:
        return f"attr {found.group(1)} of op {found.group(2)} unknown"
    found = re.search(r"No matching distribution found for (\S+)", message)
    if found:
        return f"no wheel of {found.group(1)} for this Python"
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    # The last "SomethingError: ..." line names the failure; a bare last line may be a detail of it.
    errors = [line for line in lines if re.match(r"[\w.]*(Error|Exception): ", line)]
    return (errors[-1] if errors else lines[-1] if lines else "unknown error")[:300]


def _write_atomically(path, write):
    # This mode runs without xlnet_tf (so not `xlnet_tf.storage.atomic_files`): temp name, then rename.
    directory = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=os.path.basename(path))
    os.close(handle)
    try:
        write(temporary)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def _save_arrays(path, arrays):
    def write(temporary):
        with open(temporary, "wb") as f:
            np.savez(f, **arrays)

    _write_atomically(path, write)


def _as_numpy(value):
    value = value.numpy()
    # Strings as fixed-width bytes: saved and compared without pickling objects.
    return value.astype(np.bytes_) if value.dtype == object else value


def load_and_run(cases_dir, output_dir):
    """Loads every case of `cases_dir` and runs both signatures on its inputs; writes `output_dir`.

    `output_dir/results.json` holds the versions and, per model, `loaded`, `error` and per signature the
    outputs file (`<model>.<signature>.npz`) or the error.
    """
    # The runtime must serve the SavedModels without this project: block its import even where it is installed.
    sys.modules["xlnet_tf"] = None
    with open(os.path.join(cases_dir, CASES_FILE)) as f:
        cases = json.load(f)
    results = {"python": sys.version.split()[0], "models": {}}
    try:
        import tensorflow as tf
        results["tensorflow"] = tf.__version__
        import tensorflow_text  # registers the SentencePiece and normalization ops of the strings-in signatures
        results["tensorflow_text"] = tensorflow_text.__version__
    except Exception as e:  # noqa: BLE001 - reported as the runtime's reason
        results["error"] = failure_reason(f"{type(e).__name__}: {e}")
        cases = {}
    for name, case in cases.items():
        model = results["models"][name] = {"signatures": {}}
        try:
            loaded = tf.saved_model.load(os.path.join(cases_dir, case["path"]))
        except Exception as e:  # noqa: BLE001
            model.update(loaded=False, error=failure_reason(str(e)))
            continue
        model["loaded"] = True
        for signature in case["signatures"]:
            with np.load(os.path.join(cases_dir, f"{name}.{signature}.inputs.npz")) as data:
                inputs = {key: tf.constant(data[key]) for key in data.files}
            try:
                outputs = loaded.signatures[signature](**inputs)
            except Exception as e:  # noqa: BLE001
                model["signatures"][signature] = {"error": failure_reason(str(e))}
                continue
            _save_arrays(os.path.join(output_dir, f"{name}.{signature}.npz"),
                         {key: _as_numpy(value) for key, value in outputs.items()})
            model["signatures"][signature] = {"outputs": f"{name}.{signature}.npz"}

    def write(temporary):
        with open(temporary, "w") as f:
            json.dump(results, f, indent=2)

    _write_atomically(os.path.join(output_dir, "results.json"), write)
    return results


# -- in this process: the exports and their expected outputs --------------------------------------

def _classifier_model(**config):
    import keras

    from xlnet_tf.models.xlnet_backbone import XLNetBackbone
    from xlnet_tf.models.xlnet_classifier import XLNetClassifier
    from xlnet_tf.models.xlnet_config import XLNetConfig

    # A large initializer makes the outputs depend clearly on every input.
    values = {"vocabulary_size": 200, "num_layers": 2, "num_heads": 2, "head_dim": 8, "hidden_dim": 16,
              "intermediate_dim": 32, "dropout": 0.0, "attention_dropout": 0.0, "initializer_range": 0.3}
    values.update(config)
    keras.utils.set_random_seed(0)
    model = XLNetClassifier(XLNetBackbone(XLNetConfig(**values)), num_classes=3, dropout=0.0)
    model.build_with_dummy_inputs()
    return model


def export_cases(directory, models=MODELS):
    """Exports the `models` under `directory` and records both signatures' inputs and outputs.

    Args:
        directory: where to write the presets, the SavedModels, `cases.json` and the `.npz` files.
        models: names from `MODELS`.

    Returns:
        The `cases.json` dict: model name -> `{"path", "signatures", "options"}`.
    """
    import tensorflow as tf

    from xlnet_tf.models.xlnet_backbone import XLNetBackbone
    from xlnet_tf.models.xlnet_config import XLNetConfig
    from xlnet_tf.models.xlnet_span_labeler import XLNetSpanLabeler
    from xlnet_tf.serving.export_task_model import _probe_batch
    from xlnet_tf.serving.export_task_workdir import export_task_workdir

    unknown = sorted(set(models) - set(MODELS))
    if unknown:
        raise ValueError(f"unknown models {unknown}; known: {list(MODELS)}.")
    length = 32
    classifier_preprocessing = {"task_type": "classification", "sequence_length": length,
                                "text_fields": ["premise", "hypothesis"], "truncate": "longest_first",
                                "label_names": ["contradiction", "neutral", "entailment"]}
    presets = {}

    def preset(kind):
        if kind not in presets:
            path = os.path.join(directory, "presets", kind)
            if kind == "classifier":
                model, preprocessing = _classifier_model(), classifier_preprocessing
            elif kind == "long_document":
                segment = 8
                model = _classifier_model(memory_length=3 * segment, reuse_length=0)
                preprocessing = {"task_type": "classification", "sequence_length": segment, "max_segments": 4,
                                 "text_fields": ["text"], "truncate": "longest_first",
                                 "label_names": ["a", "b", "c"]}
            else:
                config = XLNetConfig(vocabulary_size=200, num_layers=2, num_heads=2, head_dim=8, hidden_dim=16,
                                     intermediate_dim=32, dropout=0.0, attention_dropout=0.0,
                                     initializer_range=0.3)
                model = XLNetSpanLabeler(XLNetBackbone(config), start_n_top=3, end_n_top=3, dropout=0.0)
                model.build_with_dummy_inputs()
                preprocessing = {"task_type": "span", "sequence_length": length,
                                 "text_fields": ["context", "question"], "max_query_length": 8,
                                 "doc_stride": 8, "max_answer_length": 10}
            model.save_to_preset(path, vocabulary_file=VOCABULARY, preprocessing=preprocessing)
            presets[kind] = path
        return presets[kind]

    specs = {
        "classifier": ("classifier", {}),
        "span": ("span", {}),
        "long_document": ("long_document", {}),
        "classifier_bfloat16": ("classifier", {"dtype": "bfloat16"}),
        "classifier_jit": ("classifier", {"jit_compile": True}),
    }
    cases = {}
    for name in models:
        kind, options = specs[name]
        path = export_task_workdir(preset(kind), os.path.join(directory, "exports", name), overwrite=True, **options)
        if kind == "classifier":
            text = {"text": TEXTS, "text_pair": PAIRS}
            ids = _probe_batch(length, 200, batch_size=3)
        elif kind == "span":
            text = {"context": PASSAGES, "question": QUESTIONS}
            ids = _probe_batch(length, 200, batch_size=3)
        else:
            text = {"text": DOCUMENTS}
            # Three segments of 8, the first partly padding: the in-graph loop runs three times.
            ids = _probe_batch(3 * 8 - 5, 200, batch_size=3)
        inputs = {"serving_default": {k: np.array([s.encode() for s in v], np.bytes_) for k, v in text.items()},
                  "serve_token_ids": ids}
        loaded = tf.saved_model.load(path)
        for signature, values in inputs.items():
            _save_arrays(os.path.join(directory, f"{name}.{signature}.inputs.npz"), values)
            outputs = loaded.signatures[signature](**{k: tf.constant(v) for k, v in values.items()})
            _save_arrays(os.path.join(directory, f"{name}.{signature}.expected.npz"),
                         {k: _as_numpy(v) for k, v in outputs.items()})
        cases[name] = {"path": os.path.relpath(path, directory), "signatures": list(SIGNATURES), "options": options}

    def write(temporary):
        with open(temporary, "w") as f:
            json.dump(cases, f, indent=2)

    _write_atomically(os.path.join(directory, CASES_FILE), write)
    return cases


def output_tolerance(options):
    """The float tolerance of an export made with `options` (`export_task_workdir`'s keyword arguments).

    Example:
    >>> output_tolerance({"dtype": "bfloat16"}) == BFLOAT16_RUNTIME_TOLERANCE, output_tolerance({}) == TOLERANCE
    (True, True)
    """
    return BFLOAT16_RUNTIME_TOLERANCE if options.get("dtype") == "bfloat16" else TOLERANCE


def _near_tie_rows(expected, tolerance):
    """Rows whose expected `logits` have their top two closer than `2 * tolerance`: there rounding may pick
    either class, so the runtime's label there is not compared."""
    logits = expected.get("logits")
    if logits is None or logits.ndim != 2 or logits.shape[-1] < 2 or logits.dtype.kind != "f":
        return None
    top_two = np.sort(logits.astype(np.float64), axis=-1)[:, -2:]  # [batch, 2]
    return top_two[:, 1] - top_two[:, 0] <= 2 * tolerance * np.maximum(1.0, np.abs(top_two[:, 1]))  # [batch]


def compare_outputs(expected, actual, tolerance=TOLERANCE):
    """`(equal, max abs difference)` of two output dicts.

    Floats are equal when `|actual - expected| <= tolerance * max(1, |expected|)`; ints and strings when
    identical, except in rows where the expected logits are a near tie (see `_near_tie_rows`). A missing
    key, another shape, a non-finite float or unequal ints or strings give `(False, inf)`.

    Example:
    >>> compare_outputs({"p": np.array([0.5])}, {"p": np.array([0.5 + 2e-6])})
    (True, 2e-06)
    """
    worst = 0.0
    within = True
    if set(expected) != set(actual):
        return False, float("inf")
    near_ties = _near_tie_rows(expected, tolerance)
    for key, value in expected.items():
        other = actual[key]
        if value.shape != other.shape:
            return False, float("inf")
        if value.dtype.kind == "f":
            difference = np.abs(value.astype(np.float64) - other.astype(np.float64))
            if not np.all(np.isfinite(difference)):
                return False, float("inf")
            within = within and bool(np.all(difference <= tolerance * np.maximum(1.0, np.abs(value))))
            worst = max(worst, float(np.max(difference, initial=0.0)))
            continue
        compared = value, other
        if near_ties is not None and value.ndim >= 1 and value.shape[0] == near_ties.shape[0]:
            compared = value[~near_ties], other[~near_ties]
        if not np.array_equal(*compared):
            return False, float("inf")
    return within, round(worst, 9)


# -- runtimes: venvs, subprocesses, the table -------------------------------------------------------

def _python_command(version):
    """A command running the base interpreter of Python `version` ("3.11"), or None when there is none."""
    if version == f"{sys.version_info.major}.{sys.version_info.minor}":
        return [getattr(sys, "_base_executable", sys.executable)]
    # pyenv first: its `pythonX.Y` shims are on the PATH even for versions that are not active.
    if shutil.which("pyenv"):
        listed = subprocess.run(["pyenv", "versions", "--bare"], capture_output=True, text=True,
                                check=False).stdout.split()
        matches = sorted((v for v in listed if re.fullmatch(re.escape(version) + r"\.\d+", v)),
                         key=lambda v: [int(p) for p in v.split(".")])
        if matches:
            return ["env", f"PYENV_VERSION={matches[-1]}", "pyenv", "exec", "python"]
    found = shutil.which(f"python{version}")
    return [found] if found else None


def runtime_venv(cache_dir, runtime, python_version, log):
    """The python of a venv with `tensorflow==runtime.*` and `tensorflow-text==runtime.*`, made if needed.

    A venv counts as made once its `.installed` marker exists (written last); a half-made one is rebuilt.

    Returns:
        `(python path, None)` or `(None, reason)` when it does not install.
    """
    venv = os.path.join(cache_dir, f"tf-{runtime}-py{python_version}")
    python = os.path.join(venv, "bin", "python")
    if os.path.exists(os.path.join(venv, INSTALLED_MARKER)):
        return python, None
    base = _python_command(python_version)
    if base is None:
        return None, f"no Python {python_version} on this machine"
    shutil.rmtree(venv, ignore_errors=True)
    os.makedirs(cache_dir, exist_ok=True)
    packages = [f"tensorflow=={runtime}.*", f"tensorflow-text=={runtime}.*"]
    if [int(part) for part in runtime.split(".")] < [2, 18]:
        # Built against NumPy 1; before 2.12 TensorFlow does not say so, and pip would bring NumPy 2.
        packages.append("numpy<2")
    steps = [base + ["-m", "venv", venv], [python, "-m", "pip", "install", "--quiet", *packages]]
    for step in steps:
        log(f"  $ {' '.join(step)}")
        try:
            result = subprocess.run(step, capture_output=True, text=True, timeout=INSTALL_TIMEOUT, check=False)
        except subprocess.TimeoutExpired:
            return None, f"install timed out after {INSTALL_TIMEOUT} s"
        if result.returncode != 0:
            shutil.rmtree(venv, ignore_errors=True)
            return None, failure_reason(result.stderr + result.stdout)
    with open(os.path.join(venv, INSTALLED_MARKER), "w") as f:
        f.write(" ".join(packages) + "\n")
    return python, None


def check_runtime(python, cases_dir, cases, work_dir):
    """Runs the `--load` mode with `python` (clean environment, outside the repository) and compares.

    Returns:
        A row dict: `tensorflow`, `tensorflow_text`, `python`, `loaded` (count), `equal` (count),
        `max_diff`, `problems` (list of "model/signature: reason"), `error`.
    """
    os.makedirs(work_dir, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    command = [python, os.path.abspath(__file__), "--load", os.path.abspath(cases_dir), os.path.abspath(work_dir)]
    row = {"loaded": 0, "equal": 0, "max_diff": 0.0, "problems": [], "error": None, "models": len(cases)}
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=LOAD_TIMEOUT, env=env,
                                cwd=work_dir, check=False)
    except subprocess.TimeoutExpired:
        row["error"] = f"timed out after {LOAD_TIMEOUT} s"
        return row
    except OSError as e:
        row["error"] = f"cannot run {python}: {e.strerror}"
        return row
    if result.returncode != 0 or not os.path.exists(os.path.join(work_dir, "results.json")):
        row["error"] = failure_reason(result.stderr or result.stdout)
        return row
    return runtime_row(cases_dir, cases, work_dir)


def runtime_row(cases_dir, cases, work_dir):
    """The row of a runtime from what its `--load` run left in `work_dir` (see `check_runtime`)."""
    row = {"loaded": 0, "equal": 0, "max_diff": 0.0, "problems": [], "error": None, "models": len(cases)}
    with open(os.path.join(work_dir, "results.json")) as f:
        results = json.load(f)
    row.update({k: results.get(k) for k in ("tensorflow", "tensorflow_text", "python")})
    if results.get("error"):
        row["error"] = results["error"]
        return row
    for name in cases:
        model = results["models"].get(name, {})
        if not model.get("loaded"):
            row["problems"].append(f"{name}: {model.get('error', 'not run')}")
            continue
        row["loaded"] += 1
        all_equal = True
        for signature in cases[name]["signatures"]:
            outcome = model["signatures"].get(signature, {"error": "not run"})
            if "error" in outcome:
                row["problems"].append(f"{name}/{signature}: {outcome['error']}")
                all_equal = False
                continue
            with np.load(os.path.join(cases_dir, f"{name}.{signature}.expected.npz")) as e, \
                    np.load(os.path.join(work_dir, outcome["outputs"])) as a:
                equal, difference = compare_outputs({k: e[k] for k in e.files}, {k: a[k] for k in a.files},
                                                    output_tolerance(cases[name].get("options", {})))
            row["max_diff"] = max(row["max_diff"], difference)
            if not equal:
                row["problems"].append(f"{name}/{signature}: outputs differ (max diff {difference})")
                all_equal = False
        row["equal"] += all_equal
    return row


def _describe(cases):
    return ", ".join(name.replace("_", " ") for name in cases) + ": " + " + ".join(SIGNATURES)


def table_rows(rows, cases):
    """Table lines (header first) for `rows` as `check_runtime` returns them, with `runtime` and `python_version`."""
    lines = [["runtime", "Python", "loads", "outputs equal", "max diff", "what was run"]]
    for row in rows:
        runtime = row["runtime"]
        if row.get("tensorflow"):
            runtime = f"TensorFlow {row['tensorflow']} + tensorflow-text {row.get('tensorflow_text')}"
        if row.get("error"):
            lines.append([runtime, row.get("python") or row["python_version"], "no", "-", "-",
                          f"not run: {row['error']}"])
            continue
        total = row["models"]
        loads = "yes" if row["loaded"] == total else f"{row['loaded']}/{total}"
        equal = "yes" if row["equal"] == total else f"{row['equal']}/{total}"
        what = _describe(cases) + "".join(f"; {problem}" for problem in _grouped(row["problems"]))
        difference = f"{row['max_diff']:.1e}" if row["loaded"] else "-"
        lines.append([runtime, row["python"], loads, equal, difference, what])
    return lines


def _grouped(problems):
    """`["a: r", "b: r", "c: s"]` -> `["r (a, b)", "s (c)"]`: one entry per reason, in first-seen order."""
    where = {}
    for problem in problems:
        place, _, reason = problem.partition(": ")
        where.setdefault(reason, []).append(place)
    return [f"{reason} ({', '.join(places)})" for reason, places in where.items()]


def markdown_table(lines):
    """`lines` (header first) as a markdown table.

    Example:
    >>> print(markdown_table([["a", "b"], ["1", "2"]]))
    | a | b |
    |---|---|
    | 1 | 2 |
    """
    out = ["| " + " | ".join(lines[0]) + " |", "|" + "---|" * len(lines[0])]
    out += ["| " + " | ".join(cell.replace("|", "\\|") for cell in line) + " |" for line in lines[1:]]
    return "\n".join(out)


def _parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runtimes", nargs="*", default=list(DEFAULT_RUNTIMES),
                        help="TensorFlow minor versions to install and check (each with the same "
                             "tensorflow-text minor version); a version may name its Python as 2.18@3.12")
    parser.add_argument("--runtime-python", action="append", default=[],
                        help="an interpreter that already has tensorflow and tensorflow-text (no xlnet_tf); "
                             "checked as it is, besides --runtimes (pass --runtimes with no value to skip those)")
    parser.add_argument("--python-version", default="3.11", help="Python of the venvs made for --runtimes")
    parser.add_argument("--cache-dir", help="keep the venvs here and reuse them on the next run "
                                            "(default: a temporary directory, removed at the end)")
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=MODELS, help="exports to check")
    parser.add_argument("--work-dir", help="where to write the exports and outputs (default: temporary)")
    parser.add_argument("--markdown", help="also write the table to this markdown file")
    parser.add_argument("--load", nargs=2, metavar=("CASES", "OUT"), help=argparse.SUPPRESS)
    return parser


def main(argv=None):
    args = _parser().parse_args(argv)
    if args.load:
        load_and_run(*args.load)
        return 0

    def log(message):
        print(message, file=sys.stderr, flush=True)

    runtimes = []
    for spec in args.runtimes:
        runtime, _, python_version = spec.partition("@")
        if not re.fullmatch(r"\d+\.\d+", runtime) or (python_version and not re.fullmatch(r"\d+\.\d+", python_version)):
            print(f"check_serving_runtimes: runtime {spec!r} is not MAJOR.MINOR[@PYTHON_MAJOR.MINOR]", file=sys.stderr)
            return 2
        runtimes.append((runtime, python_version or args.python_version))
    for python in args.runtime_python:
        if not os.path.isfile(python):
            print(f"check_serving_runtimes: --runtime-python {python!r} is not a file", file=sys.stderr)
            return 2
    temporary = tempfile.mkdtemp(prefix="serving-runtimes-")
    try:
        work_dir = args.work_dir or os.path.join(temporary, "work")
        cache_dir = args.cache_dir or os.path.join(temporary, "venvs")
        cases_dir = os.path.join(work_dir, "cases")
        os.makedirs(cases_dir, exist_ok=True)
        log(f"exporting {', '.join(args.models)} ...")
        cases = export_cases(cases_dir, args.models)
        import tensorflow as tf
        import tensorflow_text

        exporter = (f"exported with TensorFlow {tf.__version__} + tensorflow-text {tensorflow_text.__version__}, "
                    f"Python {sys.version.split()[0]}")
        log(exporter)
        rows = []
        targets = [(f"{r}@{p}", None, r, p) for r, p in runtimes] + [(p, p, None, None) for p in args.runtime_python]
        for index, (label, python, runtime, python_version) in enumerate(targets):
            log(f"runtime {label} ...")
            row = {"runtime": f"TensorFlow {runtime}.*" if runtime else label, "python_version": python_version or "?"}
            if python is None:
                python, reason = runtime_venv(cache_dir, runtime, python_version, log)
                if reason:
                    rows.append({**row, "error": f"does not install on Python {python_version}: {reason}"})
                    log(f"  {rows[-1]['error']}")
                    continue
            row.update(check_runtime(python, cases_dir, cases, os.path.join(work_dir, f"runtime-{index}")))
            rows.append(row)
            log(f"  loads {row['loaded']}/{len(cases)}, equal {row['equal']}/{len(cases)}"
                + (f", error: {row['error']}" if row["error"] else "")
                + ("".join(f"\n    {p}" for p in row["problems"])))
        table = markdown_table(table_rows(rows, cases))
        print(exporter)
        print(table)
        if args.markdown:
            def write(path):
                with open(path, "w") as f:
                    f.write(f"{exporter}; outputs equal: floats within {TOLERANCE} "
                            f"({BFLOAT16_RUNTIME_TOLERANCE} for bfloat16), "
                            "relative above magnitude 1; identical ints and strings but labels at "
                            "near-tied logits.\n\n" + table + "\n")

            _write_atomically(args.markdown, write)
        ok = all(not r.get("error") and r["loaded"] == r["equal"] == r["models"] for r in rows)
        return 0 if ok else 1
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
