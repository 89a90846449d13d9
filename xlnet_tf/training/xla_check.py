"""Checks, on any machine, that a train step compiles as one XLA computation with no host ops.

On a TPU every op of the step must have an XLA kernel; TensorFlow's auto-clustering
elsewhere would silently run an op without one on the host, splitting the step
and adding a host round trip per step. Under `jit_compile=True` there is no such
fallback, so compiling the step here (on CPU) finds those ops before a TPU run:

- `jit_compiled_functions(model.train_function)` finds the functions Keras
  compiles with XLA inside its train function (it should be exactly one: the
  step, with the forward and backward pass, the optimizer update and the
  recurrence-memory update);
- `ops_without_xla_kernel(concrete_function)` lists every op, nested functions
  included, that has no XLA kernel;
- `xla_step_report(function, *args)` lowers the function to HLO and reports
  host transfers (send/recv, infeed/outfeed, host custom calls) and dynamically
  sized shapes, which a TPU step must not have.

Example:
>>> from xlnet_tf.training.xla_check import jit_compiled_functions, xla_step_report
>>> model.compile(optimizer=optimizer, jit_compile=True)
>>> model.make_train_function()
>>> [step] = jit_compiled_functions(model.train_function)
>>> report = xla_step_report(step, batch)
>>> report.problems()
[]
"""

import dataclasses
import re

import keras
import tensorflow as tf
from tensorflow.python.framework import kernels

# Graph bookkeeping that never reaches a device kernel (function arguments, results, no-ops).
_NOT_KERNELS = frozenset({"Placeholder", "_Arg", "_Retval", "NoOp", "_DeviceArg", "_DeviceRetval"})
# HLO instructions that move data between the device and the host inside a computation.
_HOST_TRANSFER_OPCODES = frozenset({"send", "send-done", "recv", "recv-done", "infeed", "outfeed"})
_HLO_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+ = (.+?) ([a-z][a-z\-]*)\(", re.MULTILINE)


class XlaCheckError(ValueError):
    """A function cannot be inspected for XLA compilation (named in the message)."""


def xla_kernel_op_types(device_type="XLA_CPU_JIT"):
    """The op types that have an XLA kernel for `device_type`.

    TensorFlow registers XLA kernels on first use, so a trivial function is
    compiled first.

    Args:
        device_type: "XLA_CPU_JIT" or "XLA_GPU_JIT" (TPU kernels need a TPU runtime).

    Returns:
        A frozenset of op type names.
    """
    tf.function(lambda x: x + 1, jit_compile=True)(tf.constant(1.0))
    registered = kernels.get_all_registered_kernels().kernel
    ops = frozenset(k.op for k in registered if k.device_type == device_type)
    if not ops:
        raise XlaCheckError(f"No XLA kernels registered for device type {device_type!r}; "
                            "known: XLA_CPU_JIT, XLA_GPU_JIT (with a GPU build).")
    return ops


def function_op_types(concrete_function):
    """Every op of `concrete_function`, its nested functions (loops, conds, calls) included.

    Args:
        concrete_function: a `tf.types.experimental.ConcreteFunction`.

    Returns:
        A dict `op type -> sorted list of "function/node" names`.
    """
    found = {}
    graph = concrete_function.graph
    for op in graph.get_operations():
        found.setdefault(op.type, []).append(f"{graph.name}/{op.name}")
    for function in graph.as_graph_def().library.function:
        for node in function.node_def:
            found.setdefault(node.op, []).append(f"{function.signature.name}/{node.name}")
    return {op_type: sorted(names) for op_type, names in found.items()}


def ops_without_xla_kernel(concrete_function, device_type="XLA_CPU_JIT"):
    """The ops of `concrete_function` (nested functions included) without an XLA kernel.

    Library functions that the graph only calls (not inlined) are listed by
    their own op types too, so the result is empty only when every op can be
    compiled.

    Args:
        concrete_function: a `tf.types.experimental.ConcreteFunction`.
        device_type: the XLA device whose kernels count.

    Returns:
        A dict `op type -> node names` (empty when all ops compile).
    """
    supported = xla_kernel_op_types(device_type)
    library = {f.signature.name for f in concrete_function.graph.as_graph_def().library.function}
    return {op_type: names for op_type, names in function_op_types(concrete_function).items()
            if op_type not in supported and op_type not in _NOT_KERNELS and op_type not in library}


def jit_compiled_functions(function):
    """The `tf.function`s with `jit_compile=True` reachable from `function`.

    Follows `tf.function` wrappers, `functools.wraps` and closures, which is how
    Keras' `model.train_function` holds its XLA-compiled step.

    Args:
        function: a Python callable or `tf.function` (e.g. `model.train_function`).

    Returns:
        A list of `tf.function` objects compiled with XLA, outermost first.
    """
    found, seen, pending = [], set(), [function]
    while pending:
        obj = pending.pop(0)
        if obj is None or id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, tf.types.experimental.PolymorphicFunction):
            if getattr(obj, "_jit_compile", None):
                found.append(obj)
            obj = getattr(obj, "python_function", None)
            if obj is None:
                continue
        pending.append(getattr(obj, "__wrapped__", None))
        for cell in getattr(obj, "__closure__", None) or ():
            try:
                contents = cell.cell_contents
            except ValueError:  # An empty cell (a variable assigned later).
                continue
            if callable(contents):
                pending.append(contents)
    return found


@dataclasses.dataclass(frozen=True)
class XlaStepReport:
    """What the HLO of one XLA-compiled function contains.

    Attributes:
        unsupported_ops: op type -> node names of ops without an XLA kernel.
        opcodes: HLO opcode -> count over the whole module.
        host_transfers: HLO lines that move data to or from the host.
        dynamic_shapes: HLO lines with a bounded dynamic dimension (`<=N`).
        captured_handles: ids of the resource handles (variables) the function reads or writes.
        hlo: the HLO text (before XLA's optimisations).
    """

    unsupported_ops: dict
    opcodes: dict
    host_transfers: list
    dynamic_shapes: list
    captured_handles: frozenset
    hlo: str

    def problems(self):
        """One line per finding that would keep the step off a TPU or add a host round trip."""
        lines = [f"op {op} has no XLA kernel ({', '.join(names[:3])})"
                 for op, names in sorted(self.unsupported_ops.items())]
        lines += [f"host transfer in HLO: {line.strip()[:160]}" for line in self.host_transfers]
        lines += [f"dynamic shape in HLO: {line.strip()[:160]}" for line in self.dynamic_shapes]
        return lines

    def captures(self, variable):
        """True when `variable` (a tf/keras variable, or a distributed one) is an input of the step."""
        return _handle_id(variable) in self.captured_handles


def _handle_id(variable):
    if isinstance(variable, keras.Variable):
        variable = variable.value  # The tf.Variable behind it.
    if isinstance(variable, tf.distribute.DistributedValues):
        variable = variable._get_on_device_or_primary()  # noqa: SLF001  the local copy is captured
    return id(variable.handle)


def xla_step_report(function, *args, device_type="XLA_CPU_JIT"):
    """Traces `function(*args)`, lowers it to HLO and reports what would break a TPU step.

    Args:
        function: a `tf.function` with `jit_compile=True`.
        *args: example arguments (tensors or nests of them) with the step's shapes.
        device_type: the XLA device whose kernels count for `unsupported_ops`.

    Returns:
        An `XlaStepReport`.

    Raises:
        XlaCheckError: `function` is not XLA-compiled, or XLA cannot lower it (the
            message names the failing op).
    """
    if not getattr(function, "_jit_compile", None):
        raise XlaCheckError(f"{getattr(function, '__name__', function)!r} is not a tf.function "
                            "with jit_compile=True.")
    concrete = function.get_concrete_function(*args)
    unsupported = ops_without_xla_kernel(concrete, device_type)
    try:
        hlo = function.experimental_get_compiler_ir(*args)(stage="hlo")
    except (ValueError, tf.errors.OpError) as e:
        named = f" Ops without an XLA kernel: {sorted(unsupported)}." if unsupported else ""
        text = getattr(e, "message", None) or str(e)
        lines = [line.strip() for line in text.splitlines() if line.strip()] or [""]
        reason = next((line for line in lines if "unsupported" in line.lower()), lines[0])
        raise XlaCheckError(f"XLA cannot compile {function.__name__!r}.{named} TensorFlow says: "
                            f"{reason[:300]}") from e
    opcodes, host, dynamic = scan_hlo(hlo)
    handles = frozenset(id(t) for t in concrete.captured_inputs if t.dtype == tf.resource)
    return XlaStepReport(unsupported_ops=unsupported, opcodes=opcodes, host_transfers=host,
                         dynamic_shapes=dynamic, captured_handles=handles, hlo=hlo)


def scan_hlo(hlo):
    """Counts the opcodes of an HLO module's text and picks out host transfers and dynamic shapes.

    Args:
        hlo: HLO text, e.g. from `experimental_get_compiler_ir(...)(stage="hlo")`.

    Returns:
        `(opcodes, host_transfers, dynamic_shapes)`: opcode -> count, and the
        instruction lines that send/receive to the host or have a bounded dynamic
        dimension (`f32[<=8,4]`).
    """
    opcodes, host, dynamic = {}, [], []
    for match in _HLO_INSTRUCTION.finditer(hlo):
        shape, opcode = match.group(1), match.group(2)
        opcodes[opcode] = opcodes.get(opcode, 0) + 1
        end = hlo.find("\n", match.start())
        line = hlo[match.start():end if end >= 0 else len(hlo)]
        if (opcode in _HOST_TRANSFER_OPCODES or "is_host_transfer=true" in line
                or (opcode == "custom-call" and "host" in line.lower())):
            host.append(line)
        if "<=" in shape:
            dynamic.append(line)
    return opcodes, host, dynamic
