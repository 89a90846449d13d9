"""Every format constant is defined once, in `xlnet_tf/formats/`, and every one is used."""

import ast
import pathlib
import re

from xlnet_tf.formats import (finetuning_records, preset_files, pretraining_records, serving_metadata,
                              special_tokens)

ROOT = pathlib.Path(__file__).resolve().parents[2]
FORMATS_DIR = ROOT / "xlnet_tf" / "formats"
MODULES = (finetuning_records, preset_files, pretraining_records, serving_metadata, special_tokens)

# Values no Python file outside `formats/` may spell as a string literal.
PROTECTED = {
    *special_tokens.SPECIAL_PIECES,
    pretraining_records.FORMAT, finetuning_records.FORMAT, serving_metadata.METADATA_FORMAT,
    pretraining_records.MANIFEST_FILE, pretraining_records.SHARD_GLOB, finetuning_records.SHARD_COUNTS_FILE,
    serving_metadata.METADATA_FILE, preset_files.TOKENIZER_REGISTERED_NAME,
    *(value for name, value in vars(preset_files).items() if name.endswith("_FILE")),
}


def _python_files(*folders):
    for folder in folders:
        yield from (path for path in (ROOT / folder).rglob("*.py") if FORMATS_DIR not in path.parents)


def _string_literals(path):
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value


def test_no_format_literal_outside_formats():
    found = [f"{path.relative_to(ROOT)}:{line}: {value!r}"
             for path in _python_files("xlnet_tf", "pipelines")
             for line, value in _string_literals(path) if value in PROTECTED]
    assert not found, "spell these through xlnet_tf.formats:\n" + "\n".join(found)


def test_every_public_constant_is_used():
    sources = "\n".join(path.read_text(encoding="utf-8") for path in _python_files("xlnet_tf", "tests", "pipelines")
                        if path != pathlib.Path(__file__).resolve())
    unused = []
    for module in MODULES:
        own = pathlib.Path(module.__file__).read_text(encoding="utf-8")
        for name in vars(module):
            if name.startswith("_") or name == "annotations":
                continue
            # Used elsewhere, or inside its own module beyond its definition.
            used_outside = re.search(rf"\b{name}\b", sources)
            used_inside = len(re.findall(rf"\b{name}\b", own)) > 1
            if not (used_outside or used_inside):
                unused.append(f"{module.__name__}.{name}")
    assert not unused, f"unused format constants: {unused}"
