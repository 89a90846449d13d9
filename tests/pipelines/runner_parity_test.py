"""Both Beam jobs off the in-process runner: worker processes and the portable runner give the same bytes.

Pickling, `setup()` per worker, side inputs and file I/O from other processes
are where a job breaks when it moves to Dataflow, Flink or Spark. Each job runs
here on the in-process FnApiRunner (the reference), on the FnApiRunner with 2
worker processes, and on Beam's portable runner (the in-process Python job
service, LOOPBACK workers: no Java, no Docker), with inputs read in byte
ranges; every output file must equal the reference byte for byte. The runners
are named, so a new Beam default (the DirectRunner handing jobs to Prism)
cannot change what is tested.
"""

import json
import os

import pytest

from xlnet_tf.cli import prepare_finetuning
from xlnet_tf.cli import prepare_pretraining

TESTDATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "testdata")
VOCAB = os.path.join(TESTDATA, "tiny_spiece.model")
CORPUS = os.path.join(TESTDATA, "tiny_corpus.txt")

IN_PROCESS = ["--runner=FnApiRunner", "--direct_running_mode=in_memory"]
RUNNERS = {
    "worker_processes": ["--runner=FnApiRunner", "--direct_running_mode=multi_processing", "--direct_num_workers=2"],
    "portable_loopback": ["--runner=PortableRunner", "--job_endpoint=embed", "--environment_type=LOOPBACK"],
}


def _files(directory):
    return {name: open(os.path.join(directory, name), "rb").read() for name in sorted(os.listdir(directory))
            if name.endswith(".tfrecord")}


def _without_runner(manifest):
    return {**manifest, "settings": {k: v for k, v in manifest["settings"].items() if k != "beam_args"}}


def _pretraining(output_dir, runner_args):
    return prepare_pretraining.run(["--input", CORPUS, "--vocab", VOCAB, "--output-dir", str(output_dir),
                                    "--num-shards", "3", "--chunk-length", "64", "--seed", "7",
                                    "--read-range-bytes", "8000", *runner_args]).manifest


@pytest.fixture(scope="module")
def finetuning_inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("finetuning_inputs")
    with open(root / "train.jsonl", "w", encoding="utf-8") as f:
        for i in range(40):
            f.write(json.dumps({"text": f"a quiet river number {i}", "text_pair": "the old mill",
                                "label": ["neg", "pos"][i % 3 % 2]}) + "\n")
        f.write("{not json\n")
    (root / "dev.csv").write_text('text,text_pair,label\n"the garden\nopens",a river,pos\nthe mill,,neg\n')
    return root


def _finetuning(root, output_dir, runner_args):
    return prepare_finetuning.run(["--task-type", "classification", "--input", f"train={root / 'train.jsonl'}",
                                   "--input", f"validation={root / 'dev.csv'}", "--vocab", VOCAB,
                                   "--sequence-length", "16", "--num-shards", "3", "--read-range-bytes", "400",
                                   "--output-dir", str(output_dir), *runner_args])


@pytest.fixture(scope="module")
def pretraining_reference(tmp_path_factory):
    output_dir = tmp_path_factory.mktemp("pretraining_reference")
    return output_dir, _pretraining(output_dir, IN_PROCESS)


@pytest.fixture(scope="module")
def finetuning_reference(tmp_path_factory, finetuning_inputs):
    output_dir = tmp_path_factory.mktemp("finetuning_reference")
    return output_dir, _finetuning(finetuning_inputs, output_dir, IN_PROCESS)


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.parametrize("runner", sorted(RUNNERS))
def test_pretraining_bytes_equal_the_in_process_run(pretraining_reference, tmp_path, runner):
    reference_dir, reference = pretraining_reference
    assert reference["documents"]["written"] > 100 and len(_files(reference_dir)) == 3
    manifest = _pretraining(tmp_path / runner, RUNNERS[runner])
    assert _files(tmp_path / runner) == _files(reference_dir)
    assert _without_runner(manifest) == {**_without_runner(reference), "settings": {
        **_without_runner(reference)["settings"], "output_dir": str(tmp_path / runner)}}


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.parametrize("runner", sorted(RUNNERS))
def test_finetuning_bytes_equal_the_in_process_run(finetuning_inputs, finetuning_reference, tmp_path, runner):
    reference_dir, reference = finetuning_reference
    assert reference["inputs"][0]["ranges"] > 3 and reference["examples"]["read"] == 43
    manifest = _finetuning(finetuning_inputs, tmp_path / runner, RUNNERS[runner])
    assert _files(tmp_path / runner) == _files(reference_dir)
    assert _without_runner(manifest) == _without_runner(reference)
