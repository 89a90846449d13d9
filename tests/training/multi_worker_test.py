"""A real two-process MultiWorkerMirroredStrategy run on localhost with Keras `fit`.

Two `xlnet-tf pretrain --strategy multi_worker` processes (TF_CONFIG on free
loopback ports), one replica each, global batch 4 = 2 rows per worker. The
reader gives each worker its own rows of the same global batch, so the run must
log the same losses and end with the same weights as one process on one device.
"""

import os
import subprocess

import pytest

from tests.training.helpers import cyclic_tokens, write_records
from tests.training.subprocess_runs import (REPO, assert_same_weights, environment, final_weights,
                                            free_ports, metrics, pretrain_command, tf_config)


@pytest.mark.large
@pytest.mark.subprocess
@pytest.mark.slow
def test_two_workers_match_one_device(tmp_path):
    records = write_records(str(tmp_path / "records"), cyclic_tokens(4000), vocabulary_size=40)
    single_dir, multi_dir = str(tmp_path / "single"), str(tmp_path / "multi")
    ports = free_ports(2)
    workers = [subprocess.Popen(
        pretrain_command(multi_dir, records, strategy="multi_worker"), cwd=REPO,
        env=environment(TF_CONFIG=tf_config(ports, i)), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True) for i in range(2)]
    single = subprocess.run(pretrain_command(single_dir, records), cwd=REPO, env=environment(),
                            capture_output=True, text=True, timeout=500)
    outputs = [w.communicate(timeout=500)[0] for w in workers]
    assert single.returncode == 0, single.stderr[-3000:]
    for worker, output in zip(workers, outputs):
        assert worker.returncode == 0, output[-3000:]
    assert "on 2 replica(s)" in outputs[0]
    # Only the chief writes the work directory's logs and export; the other worker backs up
    # into its own folder.
    assert os.path.isdir(os.path.join(multi_dir, "backup", "worker-1"))
    got, want = metrics(multi_dir), metrics(single_dir)
    assert [m["step"] for m in got] == [m["step"] for m in want] == [2, 4, 6, 8]
    for a, b in zip(got, want):
        assert abs(a["loss"] - b["loss"]) < 1e-5
    assert_same_weights(final_weights(multi_dir), final_weights(single_dir), rtol=1e-4, atol=1e-6)
