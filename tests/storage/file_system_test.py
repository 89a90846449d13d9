"""`atomic_files.gfile`: plain-Python local files behind `tf.io.gfile`'s names; TensorFlow's when there."""

import os
import sys

import pytest

from xlnet_tf import tensorflow_required
from xlnet_tf.storage import atomic_files
from xlnet_tf.storage.atomic_files import LocalFiles


def test_with_tensorflow_every_path_goes_through_tf_io_gfile_as_before():
    import tensorflow as tf

    assert atomic_files.gfile("/tmp/anything") is tf.io.gfile
    assert atomic_files.gfile("ram://anything") is tf.io.gfile
    assert tf.errors.NotFoundError in atomic_files.not_found_errors("/tmp/x")
    # Nothing rewrites the package's imports where TensorFlow is installed.
    assert not any(type(finder).__name__ == "_ImportErrorFinder" for finder in sys.meta_path)
    from xlnet_tf.tensorflow_required import tensorflow

    assert tensorflow is tf


def test_local_files_rename_without_overwrite_refuses_an_existing_target(tmp_path):
    source, target = tmp_path / "a", tmp_path / "b"
    source.write_text("new")
    target.write_text("old")
    with pytest.raises(FileExistsError):
        LocalFiles.rename(str(source), str(target), overwrite=False)
    assert target.read_text() == "old" and source.read_text() == "new"
    LocalFiles.rename(str(source), str(target), overwrite=True)
    assert target.read_text() == "new" and not source.exists()


def test_local_files_copy_stat_walk_and_makedirs(tmp_path):
    LocalFiles.makedirs(str(tmp_path / "d" / "e"))
    LocalFiles.makedirs(str(tmp_path / "d" / "e"))  # exists already: no error, as tf.io.gfile
    (tmp_path / "d" / "e" / "f").write_bytes(b"12345")
    LocalFiles.copy(str(tmp_path / "d" / "e" / "f"), str(tmp_path / "g"))
    with pytest.raises(FileExistsError):
        LocalFiles.copy(str(tmp_path / "d" / "e" / "f"), str(tmp_path / "g"))
    stat = LocalFiles.stat(str(tmp_path / "g"))
    assert stat.length == 5 and stat.mtime_nsec == os.stat(tmp_path / "g").st_mtime_ns
    assert [(os.path.relpath(d, tmp_path), files) for d, _, files in LocalFiles.walk(str(tmp_path / "d"))] == [
        ("d", []), (os.path.join("d", "e"), ["f"])]


def test_the_one_line_error_names_what_needs_tensorflow():
    error = tensorflow_required.TensorFlowRequiredError("Reading gs://b/config.json", "No module named 'tensorflow'")
    assert str(error) == ("Reading gs://b/config.json needs TensorFlow (pip install tensorflow): "
                          "No module named 'tensorflow'")
    assert isinstance(error, ImportError) and error.name == "tensorflow"
    text = tensorflow_required.TensorFlowRequiredError("xlnet_tf.preprocessing.xlnet_tokenizer",
                                                        module="tensorflow_text")
    assert str(text) == "xlnet_tf.preprocessing.xlnet_tokenizer needs TensorFlow Text (pip install tensorflow-text)"
