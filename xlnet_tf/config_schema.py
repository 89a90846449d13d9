"""The one type checker of every config: `XLNetConfig` and the sections of the run configs.

It sits at the top of the package and imports nothing of it (no TensorFlow
either), so `models/`, the training engine and both runs can all use it
without an import going up. Errors name the dotted key and the wrong value.

Example:
>>> import dataclasses
>>> @dataclasses.dataclass(frozen=True)
... class Section:
...     steps: int = 10
...     rate: float = 0.1
>>> build_section("training", Section, {"steps": 5, "rate": "1e-3"})
Section(steps=5, rate=0.001)
>>> check_value("training.steps", True, int)
Traceback (most recent call last):
...
xlnet_tf.config_schema.ConfigError: training.steps must be int, got bool True.
"""

import dataclasses
import re
import types
import typing
from collections.abc import Mapping
from typing import Any

# YAML 1.1 reads "1e-4" (an exponent without a dot) as a string, not a float.
SCIENTIFIC_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


class ConfigError(ValueError):
    """A configuration value is missing, unknown, of the wrong type or out of range."""


def check_value(dotted: str, value: Any, annotation, *, parse_strings: bool = True) -> Any:
    """Returns `value` checked against its annotated type, or raises `ConfigError`.

    Accepted: the type itself; an int where a float is expected (returned as a
    float); `None` for an optional field (`X | None` or `Optional[X]`); a list
    or tuple of strings for `list[str]` (returned as a list); with `parse_strings`, a string in
    scientific notation (`"1e-4"`) for a float. A bool is never an int.
    Annotations of other types are not checked.

    Args:
        dotted: the key as the user spells it (`training.train_steps`), named in errors.
        value: the value to check.
        annotation: the field's type (`int`, `float | None`, `list[str]`, ...).
        parse_strings: accept scientific-notation strings as floats (config files);
            `False` where a value comes from Python code.

    Returns:
        The value, converted as described above.
    """
    # `float | None` is a `types.UnionType`, `Optional[float]` a `typing.Union`: both mean optional.
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        if value is None:
            return None
        annotation = [a for a in typing.get_args(annotation) if a is not type(None)][0]
    if typing.get_origin(annotation) is list:
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{dotted} must be a list of strings, got {value!r}.")
        return list(value)
    if not isinstance(annotation, type) or annotation not in (int, float, bool, str):
        return value
    if value is None:
        raise ConfigError(f"{dotted} must be {annotation.__name__}, got null.")
    if annotation is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if (annotation is float and parse_strings and isinstance(value, str)
            and SCIENTIFIC_NUMBER.fullmatch(value.strip())):
        return float(value)
    if annotation is int and isinstance(value, bool):
        raise ConfigError(f"{dotted} must be int, got bool {value!r}.")
    if not isinstance(value, annotation):
        raise ConfigError(f"{dotted} must be {annotation.__name__}, got "
                          f"{type(value).__name__} {value!r}.")
    return value


def check_fields(name: str, instance) -> None:
    """Checks every field of the dataclass `instance` against its annotation (`check_value`), as `name.field`.

    What a config dataclass runs when it is built: a value from Python code is checked
    but kept as given (an int stays an int where a float is expected), and strings in
    scientific notation are a config file's spelling, not accepted here.

    Example:
    >>> import dataclasses
    >>> @dataclasses.dataclass(frozen=True)
    ... class Section:
    ...     steps: int = 10
    >>> check_fields("training", Section(steps="10"))
    Traceback (most recent call last):
    ...
    xlnet_tf.config_schema.ConfigError: training.steps must be int, got str '10'.
    """
    hints = typing.get_type_hints(type(instance))
    for field in dataclasses.fields(instance):
        check_value(f"{name}.{field.name}", getattr(instance, field.name), hints[field.name], parse_strings=False)


def build_section(name: str, cls, values: Mapping[str, Any]):
    """Builds the dataclass `cls` of config section `name` from a sparse mapping of its keys.

    Unknown keys fail, listing the known ones; every value goes through `check_value`
    under the dotted name `name.key`.
    """
    if not isinstance(values, Mapping):
        raise ConfigError(f"Section {name!r} must be a mapping, got {type(values).__name__}.")
    hints = typing.get_type_hints(cls)
    unknown = sorted(set(values) - set(hints))
    if unknown:
        raise ConfigError(f"Unknown key(s) {[f'{name}.{k}' for k in unknown]}; known keys of "
                          f"{name!r}: {sorted(hints)}.")
    return cls(**{k: check_value(f"{name}.{k}", v, hints[k]) for k, v in values.items()})


def check_sections(values: Any, known, what: str) -> None:
    """Refuses a config that is not a mapping, or that has sections other than `known`.

    Args:
        values: the parsed config.
        known: the section names it may have.
        what: how errors name the config ("A run config", "A fine-tuning config").

    A top-level `backend:` (`TOP_LEVEL_SETTINGS`) is accepted in every run config and
    checked here; it picks the Keras backend before Keras is imported
    (`xlnet_tf.backend_selection.select_backend`), so the sections never see it.

    Example:
    >>> check_sections({"backend": "jax", "training": {}}, {"training"}, "A run config")
    >>> check_sections({"backend": "mxnet"}, {"training"}, "A run config")
    Traceback (most recent call last):
    ...
    xlnet_tf.config_schema.ConfigError: backend must be one of ('tensorflow', 'jax', 'torch'), got 'mxnet'.
    """
    if not isinstance(values, Mapping):
        raise ConfigError(f"{what} must be a mapping, got {type(values).__name__}.")
    if "backend" in values:
        check_backend(values["backend"])
    unknown = sorted(set(values) - set(known) - set(TOP_LEVEL_SETTINGS))
    if unknown:
        raise ConfigError(f"Unknown section(s) {unknown}; known sections: {sorted(known)}.")


# The Keras backends a run may start on (`backend:` at the top of a run config, `--backend`).
BACKENDS = ("tensorflow", "jax", "torch")
# A run config's top-level keys that are settings, not sections: read before Keras is
# imported (`xlnet_tf.backend_selection`), so they cannot live in a section's dataclass.
TOP_LEVEL_SETTINGS = ("backend",)


def check_backend(value: Any, dotted: str = "backend") -> str:
    """Returns `value` when it names a Keras backend (`BACKENDS`), else raises `ConfigError`.

    Example:
    >>> check_backend("jax")
    'jax'
    >>> check_backend("tf")
    Traceback (most recent call last):
    ...
    xlnet_tf.config_schema.ConfigError: backend must be one of ('tensorflow', 'jax', 'torch'), got 'tf'.
    """
    if value not in BACKENDS:
        raise ConfigError(f"{dotted} must be one of {BACKENDS}, got {value!r}.")
    return value
