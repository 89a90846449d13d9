"""Runner options of both Beam jobs: a runner on other machines is refused local paths before submission."""

import os

import pytest
from apache_beam.options.pipeline_options import StandardOptions

from xlnet_tf.cli import prepare_finetuning
from xlnet_tf.cli import prepare_pretraining
from xlnet_tf.beam.pipeline_input_error import PipelineInputError
from xlnet_tf.beam.runner_options import beam_options
from xlnet_tf.beam.runner_options import check_paths_for_runner
from xlnet_tf.beam.runner_options import check_runner_available
from xlnet_tf.beam.runner_options import runner_is_local

TESTDATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "testdata")
VOCAB = os.path.join(TESTDATA, "tiny_spiece.model")
CORPUS = os.path.join(TESTDATA, "tiny_corpus.txt")

_REMOTE = [
    ["--runner", "DataflowRunner", "--project", "p", "--region", "r", "--temp_location", "gs://b/tmp"],
    ["--runner=FlinkRunner", "--flink_master", "host:8081"],
    ["--runner", "SparkRunner"],
    ["--runner", "apache_beam.runners.dataflow.dataflow_runner.DataflowRunner"],
    ["--runner", "PortableRunner", "--job_endpoint", "host:8099", "--environment_type", "DOCKER"],
]


@pytest.mark.parametrize("args, local", [
    ([], True),
    (["--runner", "DirectRunner"], True),
    (["--runner", "direct"], True),
    (["--runner", "FnApiRunner", "--direct_num_workers", "2"], True),
    (["--runner", "PrismRunner"], True),
    (["--runner", "PortableRunner", "--job_endpoint", "embed", "--environment_type", "LOOPBACK"], True),
] + [(args, False) for args in _REMOTE])
def test_which_runners_are_local(args, local):
    assert runner_is_local(beam_options(args)) is local


@pytest.mark.parametrize("args", _REMOTE)
def test_pretraining_refuses_local_paths_on_remote_runners(tmp_path, args):
    output = tmp_path / "out"
    argv = ["--input", CORPUS, "--vocab", VOCAB, "--output-dir", str(output)] + args
    runner = beam_options(args).view_as(StandardOptions).runner
    with pytest.raises(PipelineInputError) as error:
        prepare_pretraining.run(argv)
    assert str(error.value).startswith(f"--input {CORPUS!r} is a local path, but {runner} runs its workers on "
                                       "other machines")
    assert "Use gs:// paths" in str(error.value) and "--shared-filesystem" in str(error.value)
    assert not output.exists()  # refused before anything was created or submitted
    # A remote input does not let a local output through; ram:// is one process's memory.
    for out in (str(output), "ram://xlnet/out"):
        with pytest.raises(PipelineInputError, match=f"--output-dir '{out}' is a local path"):
            prepare_pretraining.run(["--input", "gs://bucket/corpus/*.txt", "--vocab", VOCAB, "--output-dir", out]
                                    + args)


def test_finetuning_refuses_local_paths_on_remote_runners(tmp_path, capsys):
    (tmp_path / "train.jsonl").write_text('{"text": "a quiet river", "label": 1}\n')
    argv = ["--task-type", "classification", "--input", f"train={tmp_path / 'train.jsonl'}", "--vocab", VOCAB,
            "--sequence-length", "16", "--output-dir", str(tmp_path / "out"), "--runner", "DataflowRunner",
            "--project", "p", "--region", "r"]
    assert prepare_finetuning.main(argv) == 2
    message = capsys.readouterr().err
    assert f"--input '{tmp_path / 'train.jsonl'}' is a local path, but DataflowRunner runs its workers" in message
    assert not (tmp_path / "out").exists()


def test_tfds_data_dir_is_checked(tmp_path):
    options = beam_options(["--runner", "FlinkRunner"])
    with pytest.raises(PipelineInputError, match="--tfds-data-dir '/data/tfds' is a local path, but FlinkRunner"):
        check_paths_for_runner(options, [("--tfds-data-dir", "/data/tfds"), ("--output-dir", "gs://b/o")])


def test_remote_paths_and_shared_filesystems_pass():
    options = beam_options(["--runner", "DataflowRunner"])
    check_paths_for_runner(options, [("--input", "gs://b/in/*.txt"), ("--output-dir", "s3://b/out"),
                                     ("--tfds-data-dir", None)])
    check_paths_for_runner(options, [("--output-dir", "/mnt/nfs/out")], shared_filesystem=True)
    check_paths_for_runner(beam_options([]), [("--output-dir", "out"), ("--input", "ram://x")])


def test_beam_options_name_direct_runner_and_processes():
    from apache_beam.options.pipeline_options import DirectOptions

    assert beam_options([]).view_as(StandardOptions).runner == "DirectRunner"
    options = beam_options(["--runner=FnApiRunner", "--direct_num_workers=2"])
    assert options.view_as(StandardOptions).runner == "FnApiRunner"
    assert options.view_as(DirectOptions).direct_running_mode == "multi_processing"


@pytest.fixture
def prism_offline(monkeypatch, tmp_path):
    """An empty Prism binary cache, and a download that fails at once as it does offline; the cache's path."""
    from apache_beam.runners.portability import prism_runner

    cache = tmp_path / "prism-cache"
    monkeypatch.setattr(prism_runner.PrismJobServer, "BIN_CACHE", str(cache))

    def offline(*args, **kwargs):
        raise RuntimeError("Unable to fetch remote prism binary: offline")

    monkeypatch.setattr(prism_runner.PrismJobServer, "_download_to_local_path", staticmethod(offline))
    return cache


_PRISM_FIX = ("Use --runner DirectRunner (runs here, downloads nothing), or pass --prism_location with the path of "
              "a Prism binary or zip downloaded beforehand.")


@pytest.mark.parametrize("runner", ["PrismRunner", "prism"])
@pytest.mark.parametrize("command", [prepare_pretraining, prepare_finetuning])
def test_prism_without_its_binary_is_one_line_naming_direct_runner(prism_offline, tmp_path, capsys, runner, command):
    (tmp_path / "train.jsonl").write_text('{"text": "a quiet river", "label": 1}\n')
    output = tmp_path / "out"
    if command is prepare_pretraining:
        argv = ["--input", CORPUS, "--vocab", VOCAB, "--output-dir", str(output)]
    else:
        argv = ["--task-type", "classification", "--input", f"train={tmp_path / 'train.jsonl'}", "--vocab", VOCAB,
                "--output-dir", str(output)]
    assert command.main(argv + ["--runner", runner]) == 2
    err = capsys.readouterr().err
    name = command.__name__.rsplit(".", 1)[-1].replace("_", "-")
    assert err.startswith(f"xlnet-tf {name}: error: --runner {runner} needs Beam's Prism binary, which is not on "
                          "this machine (Beam would download it from https://github.com/apache/beam/releases/")
    assert err.endswith(f"; offline the job would hang or fail). {_PRISM_FIX}\n") and err.count("\n") == 1
    assert not output.exists()


def test_prism_with_a_cached_binary_or_a_location_passes(prism_offline):
    options = beam_options(["--runner", "PrismRunner"])
    with pytest.raises(PipelineInputError, match="Beam would download it from ") as error:
        check_runner_available(options)
    url = str(error.value).split("download it from ")[1].split(";")[0]
    check_runner_available(beam_options(["--runner", "PrismRunner", "--prism_location", "/opt/prism"]))
    prism_offline.mkdir()
    (prism_offline / os.path.basename(url)).write_bytes(b"zip")  # Beam's cached download: it is used as is
    check_runner_available(options)
    check_runner_available(beam_options(["--runner", "DirectRunner"]))


@pytest.mark.parametrize("runner_args", [[], ["--runner", "direct"]])
def test_direct_runner_never_starts_prism(monkeypatch, tmp_path, runner_args):
    from apache_beam.runners.portability import prism_runner

    started = []

    def record(self, pipeline, options):
        started.append(True)
        raise RuntimeError("Prism started")

    monkeypatch.setattr(prism_runner.PrismRunner, "run_pipeline", record)
    job = prepare_pretraining.run(["--input", CORPUS, "--vocab", VOCAB, "--output-dir", str(tmp_path / "out"),
                                   "--num-shards", "1"] + runner_args)
    assert started == []
    assert job.manifest["documents"]["read"] == job.manifest["documents"]["written"] > 0
