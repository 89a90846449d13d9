"""A quiet command line: no start-up line of TensorFlow or Beam unless `--verbose`; `--version`."""

import configparser
import functools
import logging
import os
import subprocess
import sys

import pytest

from xlnet_tf.cli import library_logs
from xlnet_tf.cli.main import installed_version, main

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TESTDATA = os.path.join(REPO, "tests", "testdata")

# What TensorFlow, absl and Beam print on start-up on a CPU-only machine.
STARTUP_MARKERS = ("cuInit", "oneDNN", "cpu_feature_guard", "cudart_stub", "apitools",
                   "This TensorFlow binary is optimized", "WARNING: All log messages before absl",
                   "rebuild TensorFlow with the appropriate compiler flags")


def startup_lines(stderr):
    """The lines of `stderr` that come from a library's start-up."""
    return [line for line in stderr.splitlines() if any(marker in line for marker in STARTUP_MARKERS)]


def user_environment():
    """This environment as a user's shell has it: without the test suite's own log settings."""
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "CUDA_VISIBLE_DEVICES")}
    env["PYTHONPATH"] = os.pathsep.join([REPO] + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def run_cli(args, cwd):
    """`xlnet-tf ARGS` in a fresh interpreter; the `CompletedProcess`."""
    return subprocess.run([sys.executable, "-m", "xlnet_tf.cli", *args], check=False, cwd=cwd,
                          capture_output=True, text=True, timeout=300, env=user_environment())


@functools.cache
def tensorflow_startup_lines():
    """The start-up lines a plain `import tensorflow` (plus a device query) prints on this machine."""
    probe = "import tensorflow as tf; tf.config.list_physical_devices()"
    result = subprocess.run([sys.executable, "-c", probe], check=False, capture_output=True, text=True, timeout=300,
                            env=user_environment())
    return tuple(startup_lines(result.stderr))


def test_version_is_the_package_version(capsys):
    import xlnet_tf

    assert main(["--version"]) == 0
    assert capsys.readouterr().out == "0.1.0\n"
    assert installed_version() == xlnet_tf.__version__ == "0.1.0"
    # One definition: the distribution's version is read from the package.
    parser = configparser.ConfigParser()
    parser.read(os.path.join(REPO, "setup.cfg"))
    assert parser["metadata"]["version"] == "attr: xlnet_tf.__version__"


def test_usage_names_the_global_options(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: xlnet-tf [--verbose] COMMAND [ARGS...]\n       xlnet-tf --version\n")
    assert "--verbose" in out.split("options (before COMMAND):")[1]


@pytest.fixture
def saved_logging():
    """Restores the logger levels and meta-path finders `quiet_library_logs` changes."""
    names = list(library_logs.LIBRARY_LOGGERS) + list(library_logs.KEPT_LOGGERS)
    levels = {name: logging.getLogger(name).level for name in names}
    finders = list(sys.meta_path)
    environ = os.environ.get("TF_CPP_MIN_LOG_LEVEL")
    yield
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
    sys.meta_path[:] = finders
    if environ is not None:
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = environ


def test_library_warnings_are_hidden_and_the_projects_kept(saved_logging, caplog):
    library_logs.quiet_library_logs()
    logging.warning("apitools not found")  # noqa: LOG015 (Beam's own call: the root logger)
    logging.getLogger("absl").warning("absl says")
    logging.getLogger("apache_beam.io").warning("beam says")
    logging.getLogger("xlnet_tf.storage.run_lock").warning("took over a dead run's lock")
    logging.getLogger("apache_beam.options.pipeline_options").warning("Unparseable argument: --direct_num_worker")
    assert caplog.messages == ["took over a dead run's lock", "Unparseable argument: --direct_num_worker"]
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] in ("2", "3")  # conftest's 2 is kept: the user's wins.


def test_verbose_changes_no_logger(saved_logging):
    before = {name: logging.getLogger(name).level for name in library_logs.LIBRARY_LOGGERS}
    finders = list(sys.meta_path)
    library_logs.quiet_library_logs(verbose=True)
    assert {name: logging.getLogger(name).level for name in library_logs.LIBRARY_LOGGERS} == before
    assert sys.meta_path == finders


def test_captured_native_output_is_shown_when_the_block_fails(capfd):
    with library_logs.native_stderr_captured():
        os.write(2, b"native notice\n")
    with pytest.raises(ImportError), library_logs.native_stderr_captured():
        os.write(2, b"why the library failed\n")
        raise ImportError("broken")
    err = capfd.readouterr().err
    assert "native notice" not in err and "why the library failed" in err


@pytest.mark.large
@pytest.mark.subprocess
def test_prepare_pretraining_prints_no_startup_line(tmp_path):
    args = ["prepare-pretraining", "--input", os.path.join(TESTDATA, "tiny_corpus.txt"),
            "--vocab", os.path.join(TESTDATA, "tiny_spiece.model"), "--output-dir", str(tmp_path / "records"),
            "--num-shards", "1"]
    # A misspelled Beam option: what Beam says about the user's own options is the only output on stderr.
    result = run_cli(args + ["--direct_num_worker=1"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Wrote 1 shard(s)")
    assert not startup_lines(result.stderr)
    assert "Did you mean '--direct_num_workers'?" in result.stderr
    assert all("nparseable arg" in line for line in result.stderr.splitlines()), result.stderr
    verbose = run_cli(["--verbose"] + args + ["--overwrite"], tmp_path)
    assert verbose.returncode == 0, verbose.stderr
    expected = tensorflow_startup_lines()
    if expected:  # What TensorFlow prints on this machine comes back with --verbose.
        assert startup_lines(verbose.stderr)


@pytest.mark.subprocess
def test_light_commands_load_neither_tensorflow_nor_matplotlib(tmp_path):
    # The quiet set-up imports nothing; matplotlib is imported only where loss.png is drawn.
    script = ("import sys\nfrom xlnet_tf.cli.main import main\n"
              "assert main(['--version']) == 0 and main(['--help']) == 0\n"
              "assert main(['configs']) == 0\n"
              "print(sorted(m for m in ('tensorflow', 'keras', 'apache_beam', 'matplotlib') if m in sys.modules))\n")
    result = subprocess.run([sys.executable, "-c", script], check=False, cwd=tmp_path, capture_output=True,
                            text=True, timeout=120, env=user_environment())
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "[]"
    assert result.stderr == ""
