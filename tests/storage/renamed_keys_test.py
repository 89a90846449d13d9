"""Renamed keys: files and flags with a key's old spelling keep being read for one release."""

import json
import shutil
import warnings

import pytest

from xlnet_tf.storage.renamed_keys import RENAMED_KEYS, renamed_keys

SPIECE = "tests/testdata/tiny_spiece.model"


def test_old_keys_are_renamed_in_place_with_one_warning_each():
    values = {"data": {"seq_length": 64, "num_predict": 10}, "task": {"type": "span"}}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        renamed = renamed_keys(values, RENAMED_KEYS["run_config"], source="old.yaml")
    assert renamed == {"data": {"sequence_length": 64, "num_predict": 10}, "task": {"task_type": "span"}}
    assert list(renamed["data"]) == ["sequence_length", "num_predict"]  # order kept
    assert values["data"] == {"seq_length": 64, "num_predict": 10}  # the input is left alone
    assert [str(w.message) for w in caught] == [
        "old.yaml: data.seq_length is deprecated; use data.sequence_length.",
        "old.yaml: task.type is deprecated; use task.task_type."]
    assert all(w.category is FutureWarning for w in caught)


def test_new_keys_pass_silently_and_both_spellings_are_an_error():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert renamed_keys({"lowercase": True}, RENAMED_KEYS["preprocessing"]) == {"lowercase": True}
        assert renamed_keys({"task": "span"}, RENAMED_KEYS["serving_metadata"], warn=False) == {
            "task_type": "span"}
    with pytest.raises(KeyError, match="both lower_case .* and lowercase"):
        renamed_keys({"lower_case": True, "lowercase": False}, RENAMED_KEYS["preprocessing"], error=KeyError)


def test_an_earlier_runs_config_yaml_is_compared_under_the_new_names(tmp_path):
    from xlnet_tf.storage.run_config_file import END_MARKER, read_run_config

    (tmp_path / "config.yaml").write_text("data:\n  seq_length: 64\n" + END_MARKER)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the run rewrites this file: nothing to warn the user about
        assert read_run_config(str(tmp_path)) == {"data": {"sequence_length": 64}}


def test_a_task_preset_with_lower_case_in_preprocessing_json_gives_an_uncased_tokenizer(tmp_path):
    from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer

    shutil.copy(SPIECE, tmp_path / "spiece.model")
    (tmp_path / "preprocessing.json").write_text(json.dumps({"sequence_length": 16, "lower_case": True}))
    assert XLNetTokenizer.from_preset(str(tmp_path)).lowercase is True


def test_serving_metadata_of_an_earlier_export_names_its_task(tmp_path):
    from xlnet_tf.formats.serving_metadata import METADATA_FILE
    from xlnet_tf.serving import saved_model_predictor

    (tmp_path / METADATA_FILE).write_text(json.dumps({"task": "span", "sequence_length": 16}))
    assert saved_model_predictor._read_metadata(str(tmp_path))["task_type"] == "span"
