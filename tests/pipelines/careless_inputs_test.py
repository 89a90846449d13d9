"""Both Beam commands given careless inputs: one line `xlnet-tf <command>: error: ...`, exit 2, nothing written.

Through `xlnet-tf`'s own `main(argv)`. Unreadable files are made so with mode 000; as root (whom modes do not
stop) the command runs with the effective user `nobody` meanwhile, in a directory everyone may enter.
"""

import contextlib
import gzip
import json
import os
import pathlib
import shutil
import tempfile
import threading

import pytest

from tests.cli.quiet_command_line_test import run_cli
from xlnet_tf.cli import main as cli
from xlnet_tf.cli import prepare_finetuning  # noqa: F401 (loaded while this process may read every module)
from xlnet_tf.cli import prepare_pretraining  # noqa: F401 (as above; `nobody` may not enter the install)
from xlnet_tf.formats.finetuning_records import MANIFEST_FILE
from xlnet_tf.beam import finetuning_data  # noqa: F401 (as above)
from xlnet_tf.beam import pretraining_data  # noqa: F401 (as above)

TESTDATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "testdata")
VOCAB = os.path.join(TESTDATA, "tiny_spiece.model")
CORPUS = os.path.join(TESTDATA, "tiny_corpus.txt")
NOBODY = 65534
READ_AGAIN = "Check it (permissions, a complete copy) or leave it out of --input."
TWICE = "so its contents would be read twice; give each file once (to repeat a file's examples, copy it)."


def _run(capture, command, argv):
    """`xlnet-tf COMMAND ARGV` on the in-process runner: (exit code, stdout, stderr) from `capture` (capsys, capfd)."""
    code = cli.main([command, *argv, "--runner=FnApiRunner"])
    captured = capture.readouterr()
    return code, captured.out, captured.err


def _pretraining(output_dir, *inputs, extra=()):
    return ["--input", *map(str, inputs), "--vocab", VOCAB, "--output-dir", str(output_dir), *extra]


def _finetuning(output_dir, *specs, extra=()):
    return (["--task-type", "classification"] + [arg for spec in specs for arg in ("--input", str(spec))]
            + ["--vocab", VOCAB, "--sequence-length", "16", "--num-shards", "1", "--output-dir", str(output_dir),
               *extra])


def _assert_refused(capsys, command, argv, message, output_dir):
    assert _run(capsys, command, argv) == (2, "", f"xlnet-tf {command}: error: {message}\n")
    assert not os.path.exists(output_dir)


def _write_jsonl(path, count, start=0):
    path.write_text("".join(json.dumps({"text": f"a quiet river {i}", "label": i % 2}) + "\n"
                            for i in range(start, start + count)))
    return path


@pytest.fixture
def shared_dir():
    """A directory everyone may enter and write in (pytest's own temporary directories are the owner's only)."""
    path = pathlib.Path(tempfile.mkdtemp(prefix="xlnet-careless-"))
    path.chmod(0o777)
    yield path
    shutil.rmtree(path)


@contextlib.contextmanager
def _unreadable(path):
    """`path` cannot be read by this process meanwhile: mode 000, and the effective user `nobody` as root."""
    os.chmod(path, 0)
    as_root = os.geteuid() == 0
    if as_root:
        os.seteuid(NOBODY)
    try:
        if os.access(path, os.R_OK, effective_ids=True):
            pytest.skip("mode 000 does not stop this process from reading (a capability such as CAP_DAC_OVERRIDE)")
        yield
    finally:
        if as_root:
            os.seteuid(0)
        os.chmod(path, 0o644)


@contextlib.contextmanager
def _fifo_writer_now_and_then(path):
    """Opens the FIFO's write end twice a second, so a reader that opened it gets end-of-file instead of waiting."""
    stop = threading.Event()

    def unblock():
        while not stop.wait(0.5):
            with contextlib.suppress(OSError):  # no reader has it open (ENXIO)
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))

    thread = threading.Thread(target=unblock, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


# --------------------------------------------------------------------------- files that cannot be read


@pytest.mark.parametrize("command", ["prepare-pretraining", "prepare-finetuning"])
def test_an_unreadable_file_is_named_before_the_job_starts(shared_dir, capsys, command):
    path = _write_jsonl(shared_dir / "data.jsonl", 3)
    output_dir = shared_dir / "out"
    argv = _pretraining(output_dir, path) if command == "prepare-pretraining" else _finetuning(output_dir,
                                                                                                f"train={path}")
    with _unreadable(path):
        _assert_refused(capsys, command, argv, f"Input file {str(path)!r} cannot be read: Permission denied. "
                        f"{READ_AGAIN}", output_dir)


@pytest.mark.parametrize("command", ["prepare-pretraining", "prepare-finetuning"])
def test_a_fifo_is_refused_instead_of_read(tmp_path, capsys, command):
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    output_dir = tmp_path / "out"
    argv = _pretraining(output_dir, fifo) if command == "prepare-pretraining" else _finetuning(output_dir,
                                                                                                f"train={fifo}")
    with _fifo_writer_now_and_then(fifo):
        _assert_refused(capsys, command, argv, f"Input {str(fifo)!r} is a FIFO (named pipe), not a regular file; the "
                        "job reads files (a pipe is read once, and would hang or be cut short).", output_dir)


@pytest.mark.parametrize("command", ["prepare-pretraining", "prepare-finetuning"])
def test_a_link_to_nothing_is_named_with_its_target(tmp_path, capsys, command):
    link = tmp_path / "data.txt"
    os.symlink(tmp_path / "moved.txt", link)
    output_dir = tmp_path / "out"
    argv = _pretraining(output_dir, link) if command == "prepare-pretraining" else _finetuning(output_dir,
                                                                                                f"train={link}")
    _assert_refused(capsys, command, argv, f"Input {str(link)!r} is a symbolic link to "
                    f"{str(tmp_path / 'moved.txt')!r}, which does not exist.", output_dir)


@pytest.mark.parametrize("command", ["prepare-pretraining", "prepare-finetuning"])
def test_a_utf16_file_is_refused_naming_its_encoding(tmp_path, capsys, command):
    path = tmp_path / "data.jsonl"
    path.write_bytes('{"text": "a quiet river", "label": 1}\n'.encode("utf-16"))
    output_dir = tmp_path / "out"
    argv = _pretraining(output_dir, path) if command == "prepare-pretraining" else _finetuning(output_dir,
                                                                                                f"train={path}")
    _assert_refused(capsys, command, argv, f"Input file {str(path)!r} is not UTF-8 text: it starts with a UTF-16 "
                    "byte-order mark; convert it to UTF-8 (e.g. iconv -f UTF-16 -t UTF-8) or leave it out of "
                    "--input.", output_dir)


def _cut_short(path, text):
    """`path` (a .gz file) holding the first half of `text`'s gzip stream: it opens, then ends too soon."""
    data = gzip.compress(text.encode("utf-8"))
    path.write_bytes(data[:len(data) // 2])
    return path


def test_a_file_that_fails_while_the_job_reads_it_is_one_line(tmp_path, capfd):
    path = _cut_short(tmp_path / "corpus.txt.gz",
                      "".join(f"The garden opens {i}.\n" + "\n" * (i % 5 == 4) for i in range(4000)))
    code, out, err = _run(capfd, "prepare-pretraining", _pretraining(tmp_path / "out", path))
    assert (code, out) == (2, "")
    assert err == (f"xlnet-tf prepare-pretraining: error: Input file {str(path)!r} cannot be read: Compressed file "
                   f"ended before the end-of-stream marker was reached. {READ_AGAIN}\n")
    assert not (tmp_path / "out" / "manifest.json").exists()


@pytest.mark.subprocess
def test_a_file_that_fails_while_the_job_reads_it_is_all_that_the_command_prints(tmp_path):
    # In a fresh `xlnet-tf` process with the user's environment: Beam's own log of the failing step is not shown.
    path = _cut_short(tmp_path / "corpus.txt.gz",
                      "".join(f"The garden opens {i}.\n" + "\n" * (i % 5 == 4) for i in range(4000)))
    result = run_cli(["prepare-pretraining", *_pretraining(tmp_path / "out", path)], tmp_path)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (f"xlnet-tf prepare-pretraining: error: Input file {str(path)!r} cannot be read: "
                             f"Compressed file ended before the end-of-stream marker was reached. {READ_AGAIN}\n")


def test_a_jsonl_file_that_fails_while_the_job_reads_it_is_one_line(tmp_path, capfd):
    lines = "".join(json.dumps({"text": f"a quiet river {i}", "label": i % 2}) + "\n" for i in range(4000))
    path = _cut_short(tmp_path / "train.jsonl.gz", lines)
    code, out, err = _run(capfd, "prepare-finetuning", _finetuning(
        tmp_path / "out", f"train={path}", extra=["--label-names", "a,b", "--text-fields", "text"]))
    assert (code, out) == (2, "")
    assert err == (f"xlnet-tf prepare-finetuning: error: Input file {str(path)!r} cannot be read: Compressed file "
                   f"ended before the end-of-stream marker was reached. {READ_AGAIN}\n")
    assert not (tmp_path / "out" / MANIFEST_FILE).exists()


def test_a_bad_line_with_strict_is_one_line(tmp_path, capfd):
    path = tmp_path / "train.jsonl"
    path.write_text('{"text": "a quiet river", "label": 1}\n{not json\n')
    code, out, err = _run(capfd, "prepare-finetuning", _finetuning(tmp_path / "out", f"train={path}",
                                                                    extra=["--label-names", "a,b", "--strict"]))
    assert (code, out, err.count("\n")) == (2, "", 1)
    assert err.startswith(f"xlnet-tf prepare-finetuning: error: {path}:2: undecodable: not valid JSON (Expecting ")
    assert err.endswith("(drop --strict to skip and count such examples).\n")


# --------------------------------------------------------------------------- directories and globs


@pytest.mark.parametrize("command", ["prepare-pretraining", "prepare-finetuning"])
def test_a_directory_is_refused_naming_a_glob_of_its_files(tmp_path, capsys, command):
    directory = tmp_path / "data"
    directory.mkdir()
    _write_jsonl(directory / "train.jsonl", 3)
    output_dir = tmp_path / "out"
    argv = (_pretraining(output_dir, directory) if command == "prepare-pretraining"
            else _finetuning(output_dir, f"train={directory}"))
    _assert_refused(capsys, command, argv, f"Input {str(directory)!r} is a directory; give the files in it, e.g. "
                    f"{str(directory / '*')!r}.", output_dir)


def test_globs_matching_nothing_or_only_directories(tmp_path, capsys):
    (tmp_path / "corpus").mkdir()
    output_dir = tmp_path / "out"
    nothing = str(tmp_path / "corpus" / "*.txt")
    _assert_refused(capsys, "prepare-pretraining", _pretraining(output_dir, nothing),
                    f"Input {nothing!r} matches no file.", output_dir)
    directories = str(tmp_path / "corp*")
    _assert_refused(capsys, "prepare-pretraining", _pretraining(output_dir, directories),
                    f"Input {directories!r} matches only directories ({str(tmp_path / 'corpus')!r}); give the files "
                    f"in them, e.g. {str(tmp_path / 'corpus' / '*')!r}.", output_dir)
    _assert_refused(capsys, "prepare-finetuning", _finetuning(output_dir, f"train={directories}"),
                    f"Input {directories!r} matches only directories ({str(tmp_path / 'corpus')!r}); give the files "
                    f"in them, e.g. {str(tmp_path / 'corpus' / '*')!r}.", output_dir)


# --------------------------------------------------------------------------- the same file twice


@pytest.mark.parametrize("inputs, first, second", [
    (["data.txt", "./data.txt"], "'data.txt'", "'./data.txt'"),
    (["*.txt", "data.txt"], "'./data.txt' (matched by '*.txt')", "'data.txt'"),
    (["data.txt", "link.txt"], "'data.txt'", "'link.txt'"),
])
def test_pretraining_refuses_one_file_given_twice(tmp_path, monkeypatch, capsys, inputs, first, second):
    monkeypatch.chdir(tmp_path)
    shutil.copy(CORPUS, tmp_path / "data.txt")
    if "link.txt" in inputs:
        os.symlink("data.txt", tmp_path / "link.txt")
    _assert_refused(capsys, "prepare-pretraining", _pretraining("out", *inputs),
                    f"Input file {first} and {second} are the same file, {TWICE}", "out")
    _assert_refused(capsys, "prepare-pretraining", _pretraining("out", "data.txt", "data.txt"),
                    f"Input file 'data.txt' is given twice, {TWICE}", "out")


@pytest.mark.parametrize("specs, message", [
    (["train=a.jsonl,./a.jsonl"], "Input file 'a.jsonl' and './a.jsonl' are the same file"),
    (["train=*.jsonl,a.jsonl"], "Input file './a.jsonl' (matched by '*.jsonl') and 'a.jsonl' are the same file"),
    (["train=a.jsonl", "train=a.jsonl"], "Input file 'a.jsonl' is given twice"),
])
def test_finetuning_refuses_one_file_given_twice_in_a_split(tmp_path, monkeypatch, capsys, specs, message):
    monkeypatch.chdir(tmp_path)
    _write_jsonl(tmp_path / "a.jsonl", 3)
    _assert_refused(capsys, "prepare-finetuning", _finetuning("out", *specs), f"{message}, {TWICE}", "out")


def test_a_split_given_twice_reads_the_files_of_both_in_order(tmp_path, capsys):
    first, second = _write_jsonl(tmp_path / "a.jsonl", 3), _write_jsonl(tmp_path / "b.jsonl", 2, start=3)
    code, out, _ = _run(capsys, "prepare-finetuning", _finetuning(tmp_path / "twice", f"train={first}",
                                                                  f"train={second}"))
    assert (code, out.split(".")[0]) == (0, "Wrote 5 records (train: 5)")
    assert _run(capsys, "prepare-finetuning", _finetuning(tmp_path / "listed", f"train={first},{second}"))[0] == 0
    shard = "train-00000-of-00001.tfrecord"
    assert (tmp_path / "twice" / shard).read_bytes() == (tmp_path / "listed" / shard).read_bytes()


# --------------------------------------------------------------------------- output directory and vocabulary


@pytest.mark.parametrize("command", ["prepare-pretraining", "prepare-finetuning"])
def test_an_output_directory_that_is_a_file_is_one_line(tmp_path, capsys, command):
    _write_jsonl(tmp_path / "train.jsonl", 3)
    taken = tmp_path / "taken"
    taken.write_text("not a directory")
    for output_dir, message in [(taken, f"--output-dir {taken} is a file; the output must be a directory."),
                                (taken / "out", f"--output-dir {taken / 'out'} cannot be created: {taken} is a file.")]:
        argv = (_pretraining(output_dir, tmp_path / "train.jsonl") if command == "prepare-pretraining"
                else _finetuning(output_dir, f"train={tmp_path / 'train.jsonl'}"))
        assert _run(capsys, command, argv) == (2, "", f"xlnet-tf {command}: error: {message}\n")
        assert taken.read_text() == "not a directory"


@pytest.mark.parametrize("command", ["prepare-pretraining", "prepare-finetuning"])
def test_a_vocabulary_directory_is_one_line(tmp_path, capsys, command):
    _write_jsonl(tmp_path / "train.jsonl", 3)
    output_dir = tmp_path / "out"
    argv = (_pretraining(output_dir, tmp_path / "train.jsonl") if command == "prepare-pretraining"
            else _finetuning(output_dir, f"train={tmp_path / 'train.jsonl'}"))
    argv[argv.index("--vocab") + 1] = str(tmp_path)
    _assert_refused(capsys, command, argv, f"Vocabulary {str(tmp_path)!r} is a directory; give the spiece.model "
                    "file.", output_dir)
