"""RunBackup: atomic backups; an unreadable latest falls back to `.bkp`; none usable starts fresh."""

import json
import os
import uuid

import keras
import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf.storage import atomic_files
from xlnet_tf.training.run_backup import (EPOCH_ATTRIBUTE, METADATA_FILE, WEIGHTS_FILE, RunBackup,
                                          backup_epoch, select_backup)

X = np.linspace(-1, 1, 24, dtype="float32").reshape(8, 3)
Y = X @ np.array([[1.0], [-2.0], [0.5]], "float32")


def _model(seed=0):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    return model


class _EpochsSeen(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.epochs = []

    def on_epoch_begin(self, epoch, logs=None):
        self.epochs.append(epoch)


def _fit(backup_dir, epochs, model=None):
    model = model or _model()
    seen, backup = _EpochsSeen(), RunBackup(backup_dir)
    model.fit(X, Y, batch_size=4, epochs=epochs, verbose=0, shuffle=False, callbacks=[backup, seen])
    return model, seen.epochs, backup


def _load(model, path, tmp_path):
    # Keras loads only names ending in `.weights.h5`.
    copy = str(tmp_path / f"{uuid.uuid4().hex}.weights.h5")
    tf.io.gfile.copy(path, copy)
    model.load_weights(copy)


def _truncate(path, keep=100):
    data = tf.io.gfile.GFile(path, "rb").read()
    tf.io.gfile.remove(path)  # ram:// "wb" appends to an existing file (TF 2.21).
    with tf.io.gfile.GFile(path, "wb") as f:
        f.write(data[:keep])


@pytest.fixture(params=["local", "ram"])
def backup_dir(request, tmp_path):
    if request.param == "local":
        return str(tmp_path / "backup")
    return f"ram://backup-{uuid.uuid4().hex}"


def test_backups_record_their_epoch_and_keep_the_previous_pair(backup_dir):
    _fit(backup_dir, 3)
    latest = os.path.join(backup_dir, WEIGHTS_FILE)
    assert atomic_files.weights_file_attributes(latest)[EPOCH_ATTRIBUTE] == 3
    assert atomic_files.weights_file_attributes(latest + ".bkp")[EPOCH_ATTRIBUTE] == 2
    assert atomic_files.read_json(os.path.join(backup_dir, METADATA_FILE))["epoch"] == 3
    assert atomic_files.read_json(os.path.join(backup_dir, METADATA_FILE + ".bkp"))["epoch"] == 2
    assert sorted(tf.io.gfile.listdir(backup_dir)) == sorted(
        [WEIGHTS_FILE, WEIGHTS_FILE + ".bkp", METADATA_FILE, METADATA_FILE + ".bkp"])
    assert backup_epoch(backup_dir) == 3
    _, epochs, backup = _fit(backup_dir, 5)
    assert epochs == [3, 4] and backup.restored_from == latest


def test_truncated_latest_without_bkp_starts_fresh_with_a_warning(backup_dir):
    # The reported crash: killed during the very first backup write, before any .bkp existed.
    _fit(backup_dir, 1)
    latest = os.path.join(backup_dir, WEIGHTS_FILE)
    _truncate(latest)
    tf.io.gfile.remove(latest + ".bkp") if tf.io.gfile.exists(latest + ".bkp") else None
    assert backup_epoch(backup_dir) == 0
    with pytest.warns(UserWarning) as caught:
        _, epochs, backup = _fit(backup_dir, 2)
    message = str(caught[0].message)
    assert latest in message and "truncated file" in message and "starts from step 0" in message
    assert "\n" not in message
    assert epochs == [0, 1] and backup.restored_from is None
    assert atomic_files.weights_file_attributes(latest)[EPOCH_ATTRIBUTE] == 2


def test_truncated_latest_resumes_from_the_good_bkp(backup_dir):
    _fit(backup_dir, 2)
    latest = os.path.join(backup_dir, WEIGHTS_FILE)
    _truncate(latest, keep=4000)
    assert backup_epoch(backup_dir) == 1  # What the run builds its data position from.
    model = _model(seed=2)
    with pytest.warns(UserWarning, match=rf"{WEIGHTS_FILE} is unreadable .*resuming from "
                                         rf".*{WEIGHTS_FILE}\.bkp \(epoch 1\) instead"):
        _, epochs, backup = _fit(backup_dir, 1 + 1, model=model)
    assert epochs == [1] and backup.restored_from == latest + ".bkp"


def test_restore_loads_the_bkp_weights(tmp_path):
    backup_dir = str(tmp_path / "backup")
    _fit(backup_dir, 2)
    latest = os.path.join(backup_dir, WEIGHTS_FILE)
    expected = _model(seed=1)
    _load(expected, latest + ".bkp", tmp_path)
    _truncate(latest)
    model = _model(seed=3)
    callback = RunBackup(backup_dir)
    callback.set_model(model)
    with pytest.warns(UserWarning, match="resuming from"):
        callback.on_train_begin()
    np.testing.assert_array_equal(model.layers[0].kernel.numpy(), expected.layers[0].kernel.numpy())
    assert model._initial_epoch == 1
    # The bad file is replaced by the good .bkp (never promoted to .bkp itself).
    assert atomic_files.weights_file_attributes(latest)[EPOCH_ATTRIBUTE] == 1


def test_kill_between_the_renames_of_a_save_resumes_from_the_bkp_weights(tmp_path):
    backup_dir = str(tmp_path)
    _fit(backup_dir, 2)
    latest = os.path.join(backup_dir, WEIGHTS_FILE)
    # Killed right after `latest -> .bkp`: .bkp weights are epoch 2, .bkp metadata still epoch 1.
    os.replace(latest, latest + ".bkp")
    choice = select_backup(backup_dir)
    assert (choice.weights, choice.epoch, choice.problems) == (latest + ".bkp", 2, ())


def test_backup_written_by_keras_callback_takes_its_epoch_from_the_metadata(tmp_path):
    backup_dir = str(tmp_path)
    model = _model()
    model.fit(X, Y, batch_size=4, epochs=2, verbose=0,
              callbacks=[keras.callbacks.BackupAndRestore(backup_dir, delete_checkpoint=False)])
    assert backup_epoch(backup_dir) == 2
    with open(os.path.join(backup_dir, METADATA_FILE), "w") as f:
        f.write('{"epo')  # Damaged metadata and no epoch in the weights: nothing usable.
    choice = select_backup(backup_dir)
    assert choice.weights is None and METADATA_FILE in choice.problems[0]


def test_unreadable_bkp_and_missing_latest_start_fresh(tmp_path):
    backup_dir = str(tmp_path)
    _fit(backup_dir, 2)
    latest = os.path.join(backup_dir, WEIGHTS_FILE)
    os.remove(latest)
    _truncate(latest + ".bkp", keep=0)
    choice = select_backup(backup_dir)
    assert choice.weights is None and choice.epoch == 0
    assert "no readable backup left" in choice.warning(backup_dir)
    assert json.loads(open(os.path.join(backup_dir, METADATA_FILE)).read())["epoch"] == 2
