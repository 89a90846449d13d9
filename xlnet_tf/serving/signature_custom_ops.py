"""`signature_custom_ops`: which ops outside core TensorFlow each SavedModel signature runs."""

import os

import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2


def _is_core_op(op):
    # `tf.raw_ops` lists the ops compiled into TensorFlow itself; ops of
    # extension libraries (tensorflow-text) never appear there.
    return hasattr(tf.raw_ops, op)


def signature_custom_ops(saved_model_dir, tags=("serve",)):
    """Ops that are not part of core TensorFlow, per signature of a SavedModel.

    A signature whose list is empty runs on any TensorFlow Serving build; a
    non-empty list names the ops the serving binary must register (for
    tensorflow-text ops: `NormalizeUTF8`, `SentencepieceOp`, `SentencepieceTokenizeOp`, ...).

    Args:
        saved_model_dir: directory holding `saved_model.pb`.
        tags: tags of the MetaGraph to inspect.

    Returns:
        dict `signature name -> sorted list of op names`, plus the key
        `"<any>"` for every function of the file (resource creators included).

    Example:

    ```python
    from xlnet_tf.serving import signature_custom_ops
    signature_custom_ops("exports/mrpc/1")
    # {'serving_default': ['NormalizeUTF8', 'SentencepieceTokenizeOp'], 'serve_token_ids': [], ..., '<any>': [...]}
    ```
    """
    graph = _meta_graph(saved_model_dir, tags)
    library = {function.signature.name: function for function in graph.graph_def.library.function}
    result = {}
    for name, signature in graph.signature_def.items():
        outputs = {tensor.name.split(":")[0] for tensor in signature.outputs.values()}
        roots = [f for node in graph.graph_def.node if node.name in outputs for f in _called(node, library)]
        result[name] = sorted(op for op in _ops_reachable(roots, library) if not _is_core_op(op))
    every = {node.op for function in library.values() for node in function.node_def}
    every |= {node.op for node in graph.graph_def.node}
    result["<any>"] = sorted(op for op in every if op not in library and not _is_core_op(op))
    return result


def _meta_graph(saved_model_dir, tags):
    """The first MetaGraph of the SavedModel in `saved_model_dir` carrying every tag of `tags`."""
    saved_model = saved_model_pb2.SavedModel()
    with tf.io.gfile.GFile(os.path.join(saved_model_dir, "saved_model.pb"), "rb") as f:
        saved_model.ParseFromString(f.read())
    meta_graphs = [m for m in saved_model.meta_graphs if set(tags) <= set(m.meta_info_def.tags)]
    if not meta_graphs:
        raise ValueError(f"{saved_model_dir!r} has no MetaGraph with tags {list(tags)}.")
    return meta_graphs[0]


def _called(node, library):
    """The names of the library functions `node` calls (through its attributes or as its op)."""
    for value in node.attr.values():
        if value.func.name in library:
            yield value.func.name
        for function in value.list.func:
            if function.name in library:
                yield function.name
    if node.op in library:
        yield node.op


def _ops_reachable(roots, library):
    """The ops (not library functions) of the functions `roots` and every function they call."""
    seen, ops, stack = set(), set(), list(roots)
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        for node in library[name].node_def:
            ops.add(node.op)
            stack.extend(_called(node, library))
    return {op for op in ops if op not in library}
