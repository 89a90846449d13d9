"""Atomic writes: the target is complete or untouched; killed writers' temporaries are ignored."""

import os
import uuid

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf.storage import atomic_files


def _tiny_model():
    import keras

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.layers[0].kernel.assign(np.arange(6, dtype="float32").reshape(3, 2))
    return model


@pytest.fixture(params=["local", "ram"])
def root(request, tmp_path):
    if request.param == "local":
        return str(tmp_path)
    return f"ram://atomic-{uuid.uuid4().hex}"


def test_write_json_round_trip_and_no_temporaries(root):
    path = os.path.join(root, "sub", "eval_results.json")
    atomic_files.write_json(path, {"b": 1, "a": [1.5]})
    assert atomic_files.read_json(path) == {"a": [1.5], "b": 1}
    assert tf.io.gfile.listdir(os.path.join(root, "sub")) == ["eval_results.json"]


def test_write_records_bytes_equal_tfrecord_writer(root, tmp_path):
    # Lengths around the varint/CRC edge cases: empty, one byte, > 64 KiB; more than one 4 MiB write.
    records = [b"", b"\x00", bytes(range(256)) * 300, os.urandom(3 << 20), os.urandom(2 << 20), b"tail"]
    reference = str(tmp_path / "reference.tfrecord")
    with tf.io.TFRecordWriter(reference) as writer:
        for record in records:
            writer.write(record)
    tf.io.gfile.makedirs(os.path.join(root, "shards"))
    path = os.path.join(root, "shards", "records.tfrecord")
    assert atomic_files.write_records(path, iter(records)) == len(records)
    with tf.io.gfile.GFile(path, "rb") as f, open(reference, "rb") as g:
        assert f.read() == g.read()
    assert list(tf.data.TFRecordDataset(path).as_numpy_iterator()) == records
    assert tf.io.gfile.listdir(os.path.join(root, "shards")) == ["records.tfrecord"]
    assert atomic_files.write_records(path, []) == 0 and tf.io.gfile.GFile(path, "rb").read() == b""


def test_killed_writer_temporary_is_ignored_then_removed(root):
    path = os.path.join(root, "config.yaml")
    atomic_files.write_text(path, "old: 1\n")
    # What a writer killed mid-write leaves: a half-written temporary next to the target.
    stale = atomic_files.temporary_path(path)
    with tf.io.gfile.GFile(stale, "w") as f:
        f.write("new: [unfinished")
    other = atomic_files.temporary_path(os.path.join(root, "metrics.jsonl"))
    with tf.io.gfile.GFile(other, "w") as f:
        f.write("x")
    assert atomic_files.read_text(path) == "old: 1\n"
    assert atomic_files.is_temporary(stale) and not atomic_files.is_temporary(path)

    atomic_files.write_text(path, "new: 2\n")
    assert atomic_files.read_text(path) == "new: 2\n"
    # The next write of the same target removes its stale temporary, not other files' ones.
    assert sorted(tf.io.gfile.listdir(root)) == sorted(["config.yaml", os.path.basename(other)])


def test_failed_write_leaves_previous_target_intact(root):
    path = os.path.join(root, "model.weights.h5")
    model = _tiny_model()
    atomic_files.save_weights(model, path)
    before = tf.io.gfile.GFile(path, "rb").read()

    class Exploding:
        def save_weights(self, temporary):
            with tf.io.gfile.GFile(temporary, "wb") as f:
                f.write(b"\x89HDF\r\n half")  # killed here, as far as the target can tell
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_files.save_weights(Exploding(), path)
    assert tf.io.gfile.GFile(path, "rb").read() == before
    assert tf.io.gfile.listdir(root) == ["model.weights.h5"]
    assert atomic_files.weights_file_is_readable(path)


def test_save_weights_round_trip_and_name_check(root):
    path = os.path.join(root, "ckpt", "ckpt-00000002.weights.h5")
    model = _tiny_model()
    atomic_files.save_weights(model, path)
    other = _tiny_model()
    other.layers[0].kernel.assign(np.zeros((3, 2), "float32"))
    other.load_weights(path)
    np.testing.assert_array_equal(other.layers[0].kernel.numpy(),
                                  np.arange(6, dtype="float32").reshape(3, 2))
    with pytest.raises(ValueError, match=r"must end in '\.weights\.h5'.*model\.h5"):
        atomic_files.save_weights(model, os.path.join(root, "model.h5"))


def test_integrity_check_names_truncation(root):
    path = os.path.join(root, "latest.weights.h5")
    atomic_files.save_weights(_tiny_model(), path)
    data = tf.io.gfile.GFile(path, "rb").read()
    assert atomic_files.weights_file_problem(path) is None
    expected = {len(data) // 2: "truncated file", 64: "", 0: "file signature not found"}
    for cut, reason in expected.items():
        tf.io.gfile.remove(path)  # ram:// "wb" appends to an existing file (TF 2.21).
        with tf.io.gfile.GFile(path, "wb") as f:
            f.write(data[:cut])
        problem = atomic_files.weights_file_problem(path)
        assert problem and reason in problem, (cut, problem)
        assert "\n" not in problem
        assert not atomic_files.weights_file_is_readable(path)
    assert atomic_files.weights_file_problem(os.path.join(root, "absent.weights.h5")) == \
        "file not found"


def test_copy_file_and_replace_directory(root):
    source = atomic_files.write_bytes(os.path.join(root, "a.bin"), b"\x00\x01payload")
    target = atomic_files.copy_file(source, os.path.join(root, "b.bin"))
    assert tf.io.gfile.GFile(target, "rb").read() == b"\x00\x01payload"

    final = os.path.join(root, "saved_model")

    def build(version):
        def write(directory):
            atomic_files.write_text(os.path.join(directory, "version.txt"), version)
        return write

    atomic_files.replace_directory(build("1"), final)
    assert atomic_files.read_text(os.path.join(final, "version.txt")) == "1"

    def failing(directory):
        build("2")(directory)
        raise RuntimeError("export failed half way")

    with pytest.raises(RuntimeError, match="half way"):
        atomic_files.replace_directory(failing, final)
    assert atomic_files.read_text(os.path.join(final, "version.txt")) == "1"
    atomic_files.replace_directory(build("3"), final)
    assert atomic_files.read_text(os.path.join(final, "version.txt")) == "3"
    assert sorted(tf.io.gfile.listdir(root)) == ["a.bin", "b.bin", "saved_model"]
