"""`python -m tests.backends.run_probes --workdir D --output F.npz [--probes a,b]` under one Keras backend.

Imports every module of `tests/backends/probes/`, runs each `probe_<name>`
function, and writes `{"<name>.<key>": array}` to `--output` (a probe that
raises is recorded under `__errors__` with its traceback, so one broken probe
does not hide the others).
"""

import argparse
import importlib
import json
import os
import pkgutil
import sys
import time
import traceback

import numpy as np


def _probes():
    from tests.backends import probes

    found = {}
    for module_info in sorted(pkgutil.iter_modules(probes.__path__), key=lambda info: info.name):
        module = importlib.import_module(f"tests.backends.probes.{module_info.name}")
        for name in dir(module):
            if name.startswith("probe_"):
                found[name[len("probe_"):]] = getattr(module, name)
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--probes", default="")
    arguments = parser.parse_args()
    import keras

    backend = keras.config.backend()
    wanted = [name for name in arguments.probes.split(",") if name]
    outputs, errors = {}, {}
    for name, probe in _probes().items():
        if wanted and name not in wanted:
            continue
        start = time.perf_counter()
        try:
            keras.utils.set_random_seed(0)
            for key, value in probe(arguments.workdir, backend).items():
                outputs[f"{name}.{key}"] = np.asarray(value)
        except Exception:  # noqa: BLE001 - recorded and reported by the harness
            errors[name] = traceback.format_exc()
        # On stderr, which the harness shows when a run fails or times out: where the minutes went.
        print(f"probe {name} on {backend}: {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
    outputs["__errors__"] = np.array(json.dumps(errors))
    temporary = arguments.output + ".tmp"
    with open(temporary, "wb") as stream:
        np.savez(stream, **outputs)
    os.replace(temporary, arguments.output)


if __name__ == "__main__":
    main()
