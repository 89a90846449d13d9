"""`check_value`: an optional field is optional however its annotation spells it."""

import typing

import pytest

from xlnet_tf.config_schema import ConfigError, check_value

# Config sections annotate `X | None`; `Optional[X]` (older code, user sections) must check the same.
OPTIONAL_INT = {"pep604": int | None, "typing": typing.Optional[int]}  # noqa: UP045  the old spelling is tested
OPTIONAL_STRINGS = {"pep604": list[str] | None,
                    "typing": typing.Optional[typing.List[str]]}  # noqa: UP006, UP045  the old spelling is tested


@pytest.mark.parametrize("spelling", sorted(OPTIONAL_INT))
def test_optional_int_takes_none_and_an_int_and_refuses_a_bool(spelling):
    annotation = OPTIONAL_INT[spelling]
    assert check_value("model.memory_length", None, annotation) is None
    assert check_value("model.memory_length", 3, annotation) == 3
    with pytest.raises(ConfigError, match=r"^model.memory_length must be int, got bool True\.$"):
        check_value("model.memory_length", True, annotation)


@pytest.mark.parametrize("spelling", sorted(OPTIONAL_STRINGS))
def test_optional_list_of_strings_takes_a_tuple_and_refuses_numbers(spelling):
    annotation = OPTIONAL_STRINGS[spelling]
    assert check_value("task.text_fields", ("a", "b"), annotation) == ["a", "b"]
    with pytest.raises(ConfigError, match=r"^task.text_fields must be a list of strings, got \[1\]\.$"):
        check_value("task.text_fields", [1], annotation)
