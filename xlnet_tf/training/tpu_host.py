"""What this machine shows of a TPU, read the way TensorFlow and JAX find one.

A TPU VM (Cloud TPU VMs, Colab and Kaggle TPU runtimes) has its chips attached
to the machine: device files `/dev/accel0..N` (TPU v2-v4) or VFIO groups
`/dev/vfio/0..N` (v5e, v5p, v6e), and the variables its image sets
(`TPU_ACCELERATOR_TYPE`, `TPU_WORKER_ID`, ...). TensorFlow reaches such chips
with `TPUClusterResolver(tpu="local")` only: with `tpu=None` it looks for a
`TPU_NAME` and fails. A TPU reached by name (`TPU_NAME`, or `--tpu NAME` for a
TPU Node or a pod slice) is another machine. No TensorFlow import here: the
probes are files and variables, so tests fake a TPU VM in a temporary folder.

Example:
>>> from xlnet_tf.training.tpu_host import TpuHost
>>> import os, tempfile
>>> root = tempfile.mkdtemp()
>>> os.makedirs(os.path.join(root, "dev"))
>>> open(os.path.join(root, "dev", "accel0"), "w").close()
>>> host = TpuHost.detect(environ={"TPU_ACCELERATOR_TYPE": "v2-8"}, root=root,
...                       find_libtpu=lambda: "")
>>> host.has_hardware, host.accelerator_type, host.devices
(True, 'v2-8', ('/dev/accel0',))
>>> TpuHost.detect(environ={}, root=root + "/none", find_libtpu=lambda: "").has_hardware
False
"""

import dataclasses
import glob
import importlib.util
import os
import re
from collections.abc import Callable, Mapping

# The variables a TPU VM's image sets. `TPU_SKIP_MDS_QUERY` alone is no evidence of a TPU:
# the README's install check sets it on a CPU machine so that libtpu skips the metadata server.
TPU_VM_VARIABLES = ("TPU_ACCELERATOR_TYPE", "TPU_WORKER_ID", "TPU_WORKER_HOSTNAMES",
                    "TPU_SKIP_MDS_QUERY")
# Variables that by themselves mean TPU chips are attached to this machine.
_HARDWARE_VARIABLES = ("TPU_ACCELERATOR_TYPE", "TPU_WORKER_ID")
# What TensorFlow's `TPUClusterResolver(tpu=None)` reads for a TPU name, in its order
# (`tensorflow/python/tpu/client/client.py`, `_get_tpu_name`).
TPU_NAME_VARIABLES = ("KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS", "TPU_NAME")
# Device files of attached chips: accel (v2-v4) and numbered VFIO groups (v5e and later);
# `/dev/vfio/vfio`, the VFIO control file of any machine with the module loaded, is not one.
_DEVICE_PATTERNS = (("dev", "accel*"), ("dev", "vfio", "*"))
_DEVICE_NAME = re.compile(r"^(accel)?\d+$")


def _find_libtpu() -> str:
    """Where libtpu is: `TPU_LIBRARY_PATH`, else the installed `libtpu` package's folder, else ""."""
    if os.environ.get("TPU_LIBRARY_PATH"):
        return os.environ["TPU_LIBRARY_PATH"]
    try:
        spec = importlib.util.find_spec("libtpu")  # Finds it without importing it.
    except (ImportError, ValueError):
        return ""
    if spec is None:
        return ""
    locations = list(spec.submodule_search_locations or [])
    return locations[0] if locations else (spec.origin or "")


@dataclasses.dataclass(frozen=True)
class TpuHost:
    """The TPU evidence of this machine (see `detect`).

    Attributes:
        name: the TPU name TensorFlow would read from the environment
            (`KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS`, then `TPU_NAME`); "" without one.
        variables: the TPU VM variables that are set, `(name, value)` pairs.
        devices: the accelerator device files, as paths on the machine (`/dev/accel0`).
        libtpu: where libtpu is installed ("" when it is not).
    """

    name: str = ""
    variables: tuple = ()
    devices: tuple = ()
    libtpu: str = ""

    @classmethod
    def detect(cls, environ: Mapping[str, str] | None = None, root: str = "/",
               find_libtpu: Callable[[], str] | None = None) -> "TpuHost":
        """Reads the TPU evidence of this machine.

        Args:
            environ: the environment variables (default `os.environ`).
            root: the file system root the device files are under (a test's fake TPU VM).
            find_libtpu: returns where libtpu is, "" when absent (default: `TPU_LIBRARY_PATH`
                or the installed `libtpu` package).

        Returns:
            A `TpuHost`.
        """
        environ = os.environ if environ is None else environ
        name = next((environ[v] for v in TPU_NAME_VARIABLES if environ.get(v)), "")
        variables = tuple((v, environ[v]) for v in TPU_VM_VARIABLES if environ.get(v))
        devices = []
        for parts in _DEVICE_PATTERNS:
            for path in sorted(glob.glob(os.path.join(root, *parts))):
                if _DEVICE_NAME.match(os.path.basename(path)):
                    devices.append("/" + os.path.relpath(path, root).replace(os.sep, "/"))
        return cls(name=name, variables=variables, devices=tuple(devices),
                   libtpu=(find_libtpu or _find_libtpu)())

    @property
    def has_hardware(self) -> bool:
        """Whether TPU chips are attached to this machine (a TPU VM)."""
        names = {name for name, _ in self.variables}
        return bool(self.devices) or any(v in names for v in _HARDWARE_VARIABLES)

    @property
    def accelerator_type(self) -> str:
        """`TPU_ACCELERATOR_TYPE` (for example "v5litepod-1", "v2-8"); "" when not set."""
        return dict(self.variables).get("TPU_ACCELERATOR_TYPE", "")

    def evidence(self) -> str:
        """What was found, for messages: device files, variables, libtpu."""
        found = []
        if self.devices:
            shown = self.devices[:4] + (("...",) if len(self.devices) > 4 else ())
            found.append("device files " + ", ".join(shown))
        found += [f"{name}={value}" for name, value in self.variables]
        found.append(f"libtpu at {self.libtpu}" if self.libtpu else "libtpu not installed")
        return "; ".join(found)
