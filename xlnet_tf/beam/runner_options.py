"""Beam options of both jobs, the runner they run on, and the checks that it can run them.

Jobs run on the runner named by `--runner`; with none, on DirectRunner. From
Beam 2.68 DirectRunner first starts the Prism runner, which downloads its
binary from GitHub at first use (a long hang offline, a download nobody asked
for online) and leaves `--direct_num_workers` unused; the jobs' DirectRunner
goes straight to the runner DirectRunner falls back to (the FnApiRunner, in
this process or in worker processes). Prism runs when named
(`--runner PrismRunner`), and is refused before anything starts when its
binary is not on this machine and no `--prism_location` says where it is.

A runner whose workers are other machines (Dataflow, Flink, Spark, a portable
job server with Docker or process workers) cannot read a path on this
machine's disk, and worse, it can finish "successfully" with its output on
worker disks that are then thrown away. So such a runner with a local input or
output path is refused before the job is submitted.
"""

import contextlib
import logging
import os
import platform

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.options.pipeline_options import PortableOptions
from apache_beam.options.pipeline_options import PrismRunnerOptions
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.runners.direct.direct_runner import SwitchingDirectRunner
from apache_beam.version import __version__ as beam_version

from xlnet_tf.beam.pipeline_input_error import PipelineInputError
from xlnet_tf.beam.pipeline_input_error import input_error_of_failed_job

# Runners whose workers are threads or processes of this machine (lowercase class names).
_LOCAL_RUNNERS = frozenset(
    ["directrunner", "switchingdirectrunner", "bundlebaseddirectrunner", "fnapirunner", "prismrunner",
     "testdirectrunner"]
)
# The names of Beam's DirectRunner (`DirectRunner` is `SwitchingDirectRunner`).
_DIRECT_RUNNERS = frozenset(["directrunner", "switchingdirectrunner"])
# Filesystems that exist only inside one process or one machine, whatever their scheme.
_MACHINE_LOCAL_SCHEMES = ("file://", "ram://")


class _StepInputErrorFilter(logging.Filter):
    """Drops Beam's log (a traceback) of a step that raised `PipelineInputError`: the command says it in one line."""

    def filter(self, record):
        return not isinstance(record.msg, PipelineInputError)


@contextlib.contextmanager
def _step_input_errors_unlogged():
    # The logger Beam's DoFn runner reports a failing step with, in the process that runs the steps.
    logger = logging.getLogger("apache_beam.runners.common")
    step_filter = _StepInputErrorFilter()
    logger.addFilter(step_filter)
    try:
        yield
    finally:
        logger.removeFilter(step_filter)


class _DirectRunnerWithoutPrism(SwitchingDirectRunner):
    """Beam's DirectRunner without its first try of Prism: the FnApiRunner (BundleBasedDirectRunner if need be).

    DirectRunner leaves Prism out for interactive pipelines, and that flag
    does nothing else in it; this runner sets it for that alone.
    """

    _is_interactive = True


def beam_options(beam_args):
    """`PipelineOptions` from the arguments the job's command line did not know.

    DirectRunner unless `--runner` is given; `--direct_num_workers` without a
    running mode means separate processes (threads of one process share one GIL).

    Args:
        beam_args: Beam's own flags, e.g. `["--runner", "DataflowRunner", "--project", "p"]`.

    Returns:
        `apache_beam.options.pipeline_options.PipelineOptions`.

    Example:
    >>> from xlnet_tf.beam.runner_options import StandardOptions, beam_options
    >>> beam_options(["--direct_num_workers", "2"]).view_as(StandardOptions).runner
    'DirectRunner'
    """
    beam_args = list(beam_args)
    flags = {arg.split("=")[0] for arg in beam_args if arg.startswith("--")}
    if "--runner" not in flags:
        beam_args.append("--runner=DirectRunner")
    if "--direct_num_workers" in flags and "--direct_running_mode" not in flags:
        beam_args.append("--direct_running_mode=multi_processing")
    return PipelineOptions(beam_args)


def _runner_name(options):
    """The runner `options` name, as a lowercase class name: "directrunner" for `direct` or a dotted path."""
    runner = options.view_as(StandardOptions).runner or "DirectRunner"
    name = str(runner).rsplit(".", 1)[-1].lower()
    return name if name.endswith("runner") else name + "runner"  # Beam accepts "direct" for "DirectRunner".


def runner_is_local(options):
    """Whether every worker of the runner in `options` runs on this machine.

    The Direct, FnApi and Prism runners, and the portable runner with LOOPBACK
    workers (they run inside the submitting process), are local.
    """
    name = _runner_name(options)
    if name in _LOCAL_RUNNERS:
        return True
    environment = (options.view_as(PortableOptions).environment_type or "").upper()
    return name == "portablerunner" and environment == "LOOPBACK"


def is_machine_local(path):
    """Whether `path` names storage only this machine (or process) sees: no scheme, `file://` or `ram://`."""
    path = str(path)
    return "://" not in path or path.startswith(_MACHINE_LOCAL_SCHEMES)


def check_paths_for_runner(options, paths, *, shared_filesystem=False):
    """Refuses local paths for a runner whose workers are other machines.

    Args:
        options: the job's `PipelineOptions`.
        paths: `(what, path)` pairs the workers read or write, e.g.
            `("--output-dir", "data/out")`; `None` paths are ignored.
        shared_filesystem: the local paths are on a filesystem every worker
            mounts at the same place (an NFS mount on a Flink cluster, say).

    Raises:
        PipelineInputError: naming the first local path and the runner.

    Example:
    >>> from xlnet_tf.beam.runner_options import beam_options, check_paths_for_runner
    >>> check_paths_for_runner(beam_options(["--runner", "DataflowRunner"]),
    ...                        [("--output-dir", "out")])  # doctest: +SKIP
    PipelineInputError: --output-dir 'out' is a local path, but DataflowRunner runs on other machines ...
    """
    if shared_filesystem or runner_is_local(options):
        return
    runner = options.view_as(StandardOptions).runner
    for what, path in paths:
        if path is not None and is_machine_local(path):
            raise PipelineInputError(
                f"{what} {path!r} is a local path, but {runner} runs its workers on other machines, which "
                "cannot see this machine's disk (output written there is lost with the workers). Use gs:// "
                "paths (or another filesystem every worker reaches: s3://, hdfs://), or pass "
                "--shared-filesystem when the path is on a filesystem every worker mounts at the same place."
            )


def _prism_binary_problem(options):
    """Where Beam would download the Prism binary from, when it is not on this machine; None when it is."""
    # import time: only a job that names Prism looks for it
    from apache_beam.runners.portability.prism_runner import PrismJobServer

    prism = options.view_as(PrismRunnerOptions)
    if prism.prism_location:
        return None  # the user's binary or zip: Prism reports a bad one itself
    version = prism.prism_beam_version_override or f"v{beam_version}"
    try:
        url = PrismJobServer(options).construct_download_url(version, platform.system(), platform.machine())
    except ValueError as e:  # no released binary for this system
        return str(e)
    # Beam caches the zip and the binary unzipped from it (a development release builds `prism` with Go).
    cached = os.path.join(PrismJobServer.BIN_CACHE, os.path.basename(url))
    if any(os.path.exists(path) for path in (cached, os.path.splitext(cached)[0])):
        return None
    if ".dev" in version and os.path.exists(os.path.join(PrismJobServer.BIN_CACHE, "prism")):
        return None
    return f"Beam would download it from {url}"


def check_runner_available(options):
    """Refuses a runner that would have to download itself before the job could start (Prism).

    Args:
        options: the job's `PipelineOptions`.

    Raises:
        PipelineInputError: the runner is Prism, its binary is not in Beam's
            cache and `--prism_location` is not given; the message names
            DirectRunner, which needs nothing more.

    Example:
    >>> from xlnet_tf.beam.runner_options import beam_options, check_runner_available
    >>> check_runner_available(beam_options(["--runner", "PrismRunner"]))  # doctest: +SKIP
    PipelineInputError: --runner PrismRunner needs Beam's Prism binary, which is not on this machine ...
    """
    if _runner_name(options) != "prismrunner":
        return
    problem = _prism_binary_problem(options)
    if problem:
        runner = options.view_as(StandardOptions).runner
        raise PipelineInputError(
            f"--runner {runner} needs Beam's Prism binary, which is not on this machine ({problem}; offline "
            "the job would hang or fail). Use --runner DirectRunner (runs here, downloads nothing), or pass "
            "--prism_location with the path of a Prism binary or zip downloaded beforehand."
        )


def run_pipeline(options, build):
    """Builds a job on the runner `options` name, runs it and waits for it.

    DirectRunner (named, or by default) runs without its Prism attempt (see the module's docstring).

    Args:
        options: the job's `PipelineOptions` (`beam_options`).
        build: called with the new `beam.Pipeline`; adds the job's transforms.

    Returns:
        Beam's `PipelineResult` of the finished job.

    Raises:
        PipelineInputError: bad input a worker found (a file that cannot be
            read, a bad line with `--strict`), with the worker's message.
    """
    runner = _DirectRunnerWithoutPrism() if _runner_name(options) in _DIRECT_RUNNERS else None
    pipeline = beam.Pipeline(runner=runner, options=options)
    build(pipeline)
    try:
        with _step_input_errors_unlogged():
            result = pipeline.run()
            result.wait_until_finish()
    except Exception as e:
        error = input_error_of_failed_job(e)
        if error is None:
            raise
        raise error from e
    return result
