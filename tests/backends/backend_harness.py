"""Runs the model on every Keras backend, each in its own process, and hands the outputs back.

A Keras backend is fixed when `keras` is first imported, so one pytest process
(TensorFlow, see `tests/conftest.py`) cannot run the model on JAX or PyTorch.
Here each backend runs the probes of `tests/backends/probes/` once per pytest
run (one probe module per comparison module), in a fresh `python -m tests.backends.run_probes` process with
`KERAS_BACKEND` set; the tests compare the outputs across backends. A probe is
a function `probe_<name>(workdir, backend)` returning a dict of numpy arrays;
`workdir` is shared by every backend's run, so a probe can load there what
another backend saved (probes run per backend in the order of `BACKENDS`).

Example:
>>> outputs = backend_outputs(tmp_path)  # doctest: +SKIP
>>> outputs["jax"]["backbone.sequence_output"].shape  # doctest: +SKIP
(2, 6, 8)
"""

import json
import os
import subprocess
import sys

import numpy as np

BACKENDS = ("tensorflow", "jax", "torch")
REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def backend_available(backend):
    """Whether `backend`'s framework is installed here (torch and jax are test extras)."""
    import importlib.util

    module = {"tensorflow": "tensorflow", "jax": "jax", "torch": "torch"}[backend]
    return importlib.util.find_spec(module) is not None


def run_probes(backend, workdir, probe_names=None, timeout=1800):
    """Every probe (or those named) on `backend` in a fresh process: `{"probe.key": array}`.

    The probes' errors are under `"__errors__"` (`{probe: traceback}`); `probe_output` raises them.

    Raises:
        RuntimeError: the process failed; the message holds its last output lines.
    """
    output = os.path.join(workdir, f"outputs-{backend}.npz")
    command = [sys.executable, "-m", "tests.backends.run_probes", "--workdir", workdir, "--output", output]
    if probe_names:
        command += ["--probes", ",".join(probe_names)]
    environment = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="",
                       PYTHONPATH=REPOSITORY + os.pathsep + os.environ.get("PYTHONPATH", ""))
    try:
        result = subprocess.run(command, cwd=REPOSITORY, env=environment, capture_output=True, text=True,
                                timeout=timeout)
    except subprocess.TimeoutExpired as error:
        output = (error.stderr or b"").decode(errors="replace") if isinstance(error.stderr, bytes) else error.stderr
        tail = "\n".join(line for line in (output or "").splitlines() if line.startswith("probe "))
        raise RuntimeError(f"probes on {backend} ran past {timeout} s; the probes that finished:\n{tail}") from None
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-40:])
        raise RuntimeError(f"probes on {backend} failed (exit {result.returncode}):\n{tail}")
    return load_outputs(output)


def load_outputs(path):
    """The `{"probe.key": array, "__errors__": {probe: traceback}}` that `run_probes` wrote to `path`."""
    with np.load(path) as stored:
        outputs = {key: stored[key] for key in stored.files}
    outputs["__errors__"] = json.loads(str(outputs.pop("__errors__", np.array("{}"))))
    return outputs


def probe_output(outputs, backend, key):
    """`outputs[backend][key]` ("probe.key"), or an AssertionError carrying the probe's own traceback."""
    probe = key.split(".", 1)[0]
    error = outputs[backend]["__errors__"].get(probe)
    if error is not None:
        raise AssertionError(f"probe {probe!r} raised on {backend}:\n{error}")
    if key not in outputs[backend]:
        raise AssertionError(f"probe output {key!r} missing on {backend}; it has {sorted(outputs[backend])}")
    return outputs[backend][key]


def probe_names_of(probe_module):
    """The probe names (`probe_<name>`) that `tests/backends/probes/<probe_module>.py` defines."""
    import importlib

    module = importlib.import_module(f"tests.backends.probes.{probe_module}")
    return [name[len("probe_"):] for name in dir(module) if name.startswith("probe_")]


def backend_outputs(workdir, backends=BACKENDS, probe_names=None):
    """`{backend: run_probes(backend, ...)}` for each installed backend, in `BACKENDS` order."""
    return {backend: run_probes(backend, str(workdir), probe_names)
            for backend in backends if backend_available(backend)}


def shared_backend_outputs(workdir, backends=BACKENDS, probe_module=None):
    """`backend_outputs(workdir)` (of `probe_module`'s probes, or all) computed once by whichever process asks
    first; the others load its files.

    A file lock in `workdir` serializes the processes (pytest-xdist workers); a marker file written after
    every backend's run says the outputs are complete, so a worker that died midway makes the next one
    start over instead of reading half a run.
    """
    import fcntl

    workdir = os.fspath(workdir)
    os.makedirs(workdir, exist_ok=True)
    installed = [backend for backend in backends if backend_available(backend)]
    done = os.path.join(workdir, "complete")
    with open(os.path.join(workdir, "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(done):
            backend_outputs(workdir, installed, probe_names_of(probe_module) if probe_module else None)
            with open(done, "w") as marker:
                marker.write(" ".join(installed))
    return {backend: load_outputs(os.path.join(workdir, f"outputs-{backend}.npz")) for backend in installed}
