"""Which Keras backend a run starts on: `--backend`, else the config's `backend:`, else the environment.

Keras reads `KERAS_BACKEND` once, when it is first imported, so the choice is
made here, before any module that imports Keras (or TensorFlow) is loaded: the
CLI calls `select_backend` first thing. The order is

1. `--backend {tensorflow,jax,torch}` on the command line;
2. the top-level `backend:` key of the run config files (`--config`, later files win);
3. `KERAS_BACKEND` in the environment;
4. `tensorflow`.

When Keras was already imported with another backend (a notebook that imported
it first), the explicit choice cannot take effect and is an error in one line.
No Keras, TensorFlow or JAX import here.

Example:
>>> environ = {}
>>> select_backend(["--backend", "jax", "--workdir", "run"], environ=environ, keras_loaded=lambda: None)
'jax'
>>> environ["KERAS_BACKEND"]
'jax'
>>> requested_backend(["--workdir", "run"], environ={})
('tensorflow', 'default')
"""

import os
import sys
from collections.abc import Callable, Mapping, MutableMapping, Sequence

import yaml

from xlnet_tf.config_schema import BACKENDS, ConfigError, check_backend
from xlnet_tf.training.shipped_configs import UnknownConfigError, resolve_config

DEFAULT_BACKEND = "tensorflow"


class BackendError(ValueError):
    """The requested backend cannot be used in this process; the message names the cause and the fix."""


def _flag_values(argv: Sequence[str], flag: str) -> list:
    """Every value of `flag` in `argv` (`--flag VALUE` and `--flag=VALUE`), in order."""
    values, argv = [], list(argv)
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if arg == flag and i + 1 < len(argv):
            values.append(argv[i + 1])
        elif arg.startswith(flag + "="):
            values.append(arg[len(flag) + 1:])
    return values


def config_backend(config_paths: Sequence[str]) -> tuple:
    """The `backend:` of the last config file that sets one, and that file: `(backend, path)` or `(None, None)`.

    Args:
        config_paths: YAML files, in the order the run applies them.

    Raises:
        ConfigError: a `backend:` value that is not a Keras backend (naming the file).
    """
    found = (None, None)
    for path in config_paths:
        try:
            with open(path, encoding="utf-8") as f:
                values = yaml.safe_load(f)
        except (OSError, yaml.YAMLError):
            continue  # The command reads its configs again and reports what is wrong with them.
        if isinstance(values, Mapping) and "backend" in values:
            try:
                found = (check_backend(values["backend"]), path)
            except ConfigError as e:
                raise ConfigError(f"{path}: {e}") from None
    return found


def requested_backend(argv: Sequence[str], config_paths: Sequence[str] = (),
                      environ: Mapping[str, str] | None = None) -> tuple:
    """The backend a run asks for and where that came from: `(backend, source)`.

    `source` is `"--backend"`, the config file's path, `"KERAS_BACKEND"` or `"default"`.

    Example:
    >>> requested_backend(["--backend=torch"], environ={"KERAS_BACKEND": "jax"})
    ('torch', '--backend')
    >>> requested_backend([], environ={"KERAS_BACKEND": "jax"})
    ('jax', 'KERAS_BACKEND')
    """
    environ = os.environ if environ is None else environ
    flags = _flag_values(argv, "--backend")
    if flags:
        return check_backend(flags[-1], "--backend"), "--backend"
    backend, path = config_backend(config_paths)
    if backend:
        return backend, path
    if environ.get("KERAS_BACKEND"):
        return check_backend(environ["KERAS_BACKEND"], "KERAS_BACKEND"), "KERAS_BACKEND"
    return DEFAULT_BACKEND, "default"


def _loaded_keras_backend():
    """The backend of the Keras already imported in this process, or None."""
    keras = sys.modules.get("keras")
    if keras is None or not hasattr(keras, "config"):
        return None
    return keras.config.backend()


def config_paths_of(argv: Sequence[str], kind: str) -> list:
    """The YAML paths of the `--config` values in `argv` (paths or shipped config names of `kind`).

    A value that names nothing is left out: the command reports it with its own message.
    """
    paths = []
    for value in _flag_values(argv, "--config"):
        try:
            paths.append(resolve_config(value, kind))
        except UnknownConfigError:
            continue
    return paths


def select_backend(argv: Sequence[str], config_paths: Sequence[str] | None = None, *, kind: str = "pretrain",
                   environ: MutableMapping[str, str] | None = None,
                   keras_loaded: Callable[[], str | None] = _loaded_keras_backend) -> str:
    """Sets `KERAS_BACKEND` for this process from the run's request; call before Keras is imported.

    Args:
        argv: the command's arguments (`--backend`, `--config` are read; the rest is ignored).
        config_paths: the run config files; None reads the `--config` values of `argv`
            (paths or shipped config names of `kind`).
        kind: "pretrain" or "finetune": where `--config NAME` looks for shipped configs.
        environ: the environment to read and set (default `os.environ`).
        keras_loaded: returns the backend of an already imported Keras, or None.

    Returns:
        The backend name.

    Raises:
        BackendError: Keras is already imported with another backend than the one asked for.
        ConfigError: a backend name that is not one of `BACKENDS`.
    """
    environ = os.environ if environ is None else environ
    if config_paths is None:
        config_paths = config_paths_of(argv, kind)
    backend, source = requested_backend(argv, config_paths, environ)
    loaded = keras_loaded()
    if loaded is not None and loaded != backend:
        if source == "default":
            return loaded  # Nothing asked for: the process keeps the backend it already runs.
        raise BackendError(
            f"Backend {backend!r} (from {source}) cannot be used: Keras is already imported in this process "
            f"with the {loaded!r} backend; set KERAS_BACKEND={backend} before anything imports keras "
            f"(or start a new process/runtime).")
    environ["KERAS_BACKEND"] = backend
    return backend


__all__ = ["BACKENDS", "BackendError", "DEFAULT_BACKEND", "config_backend", "config_paths_of",
           "requested_backend", "select_backend"]
