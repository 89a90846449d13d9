"""Beam options of both jobs, and the check that a runner's workers can reach the job's paths.

Jobs run on the runner named by `--runner` (DirectRunner when none is named).
A runner whose workers are other machines (Dataflow, Flink, Spark, a portable
job server with Docker or process workers) cannot read a path on this
machine's disk, and worse, it can finish "successfully" with its output on
worker disks that are then thrown away. So such a runner with a local input or
output path is refused before the job is submitted.
"""

from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.options.pipeline_options import PortableOptions
from apache_beam.options.pipeline_options import StandardOptions

from xlnet_tf.pipelines.pipeline_input_error import PipelineInputError

# Runners whose workers are threads or processes of this machine (lowercase class names).
_LOCAL_RUNNERS = frozenset(
    ["directrunner", "switchingdirectrunner", "bundlebaseddirectrunner", "fnapirunner", "prismrunner",
     "testdirectrunner"]
)
# Filesystems that exist only inside one process or one machine, whatever their scheme.
_MACHINE_LOCAL_SCHEMES = ("file://", "ram://")


def beam_options(beam_args):
    """`PipelineOptions` from the arguments the job's command line did not know.

    DirectRunner unless `--runner` is given; `--direct_num_workers` without a
    running mode means separate processes (threads of one process share one GIL).

    Args:
        beam_args: Beam's own flags, e.g. `["--runner", "DataflowRunner", "--project", "p"]`.

    Returns:
        `apache_beam.options.pipeline_options.PipelineOptions`.

    Example:
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


def runner_is_local(options):
    """Whether every worker of the runner in `options` runs on this machine.

    The Direct, FnApi and Prism runners, and the portable runner with LOOPBACK
    workers (they run inside the submitting process), are local.
    """
    runner = options.view_as(StandardOptions).runner or "DirectRunner"
    name = str(runner).rsplit(".", 1)[-1].lower()
    if not name.endswith("runner"):
        name += "runner"  # Beam accepts "direct" for "DirectRunner".
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
