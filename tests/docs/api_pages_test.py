"""The API reference pages (docs/api/) against the packages' `__all__`, both ways."""

import importlib
import os
import re
import shutil

import pytest

from tests.docs import examples

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
API_DIR = os.path.join(REPO, "docs", "api")
DIRECTIVE = re.compile(r"^::: (\S+)$", re.MULTILINE)


def _object_pages():
    """`{page path relative to docs/api: the object path its directive names}`, index pages left out."""
    pages = {}
    for folder, _, files in os.walk(API_DIR):
        for file_name in files:
            if file_name.endswith(".md") and file_name != "index.md":
                path = os.path.join(folder, file_name)
                with open(path, encoding="utf-8") as f:
                    directives = DIRECTIVE.findall(f.read())
                assert len(directives) == 1, f"{path}: expected one ::: directive, found {directives}"
                pages[os.path.relpath(path, API_DIR).replace(os.sep, "/")] = directives[0]
    return pages


def _resolve(path):
    """The object a directive names (`module.qualname`; a package's function named like its submodule is
    `package.name.name`, see tools/write_api_pages.py)."""
    module_name, _, attribute = path.rpartition(".")
    module = importlib.import_module(module_name)
    if not hasattr(module, attribute) and module_name.endswith(f".{attribute}"):
        module = importlib.import_module(module_name.rpartition(".")[0])
    return getattr(module, attribute)


def test_every_public_class_and_function_has_a_page_and_every_page_is_public():
    public = {(package, name): obj for package, name, obj in examples.public_names()}
    pages = _object_pages()
    assert ("xlnet_tf", "XLNetBackbone") in public and ("xlnet_tf.serving", "TaskServingModule") in public
    documented = {}
    for page, path in pages.items():
        documented.setdefault(id(_resolve(path)), []).append(page)
    missing = sorted(f"{package}.{name}" for (package, name), obj in public.items() if id(obj) not in documented)
    assert not missing, f"public names without a page (run tools/write_api_pages.py): {missing}"
    public_ids = {id(obj) for obj in public.values()}
    extra = sorted(page for page, path in pages.items() if id(_resolve(path)) not in public_ids)
    assert not extra, f"pages for names no __all__ exports: {extra}"
    duplicated = sorted(pages_of for pages_of in documented.values() if len(pages_of) > 1)
    assert not duplicated, f"one object, several pages: {duplicated}"
    # A page is named after the public name, not the defining module.
    public_names = {name for _, name in public}
    assert all(os.path.splitext(os.path.basename(page))[0] in public_names for page in pages)


def test_the_pages_are_what_the_script_writes():
    tool = examples.api_pages_tool()
    assert tool.differences(API_DIR, tool.api_pages()) == []


def test_the_check_names_a_missing_page_a_stale_page_and_an_edited_page(tmp_path):
    tool = examples.api_pages_tool()
    api_dir = str(tmp_path / "api")
    shutil.copytree(API_DIR, api_dir)
    os.remove(os.path.join(api_dir, "xlnet_tf", "XLNetBackbone.md"))
    with open(os.path.join(api_dir, "serving", "OldName.md"), "w", encoding="utf-8") as f:
        f.write("::: xlnet_tf.serving.old.OldName\n")
    with open(os.path.join(api_dir, "presets", "resolve_preset.md"), "a", encoding="utf-8") as f:
        f.write("edited\n")
    assert tool.differences(api_dir, tool.api_pages()) == [
        "missing page: xlnet_tf/XLNetBackbone.md",
        "page for a name no __all__ exports: serving/OldName.md",
        "out of date: presets/resolve_preset.md",
    ]
    assert tool.main(["--api-dir", api_dir]) == 0
    assert tool.differences(api_dir, tool.api_pages()) == []
    assert not [n for n in os.listdir(os.path.join(api_dir, "serving")) if n.startswith(".tmp-")]


def test_a_function_named_like_its_packages_submodule_has_its_own_page():
    # Griffe keeps the submodule `xlnet_tf/tasks/task_type.py` at `xlnet_tf.tasks.task_type`; the function
    # is filed (by docs/extensions) and named one level down, apart from the module's `TaskType`.
    from xlnet_tf import tasks

    tool = examples.api_pages_tool()
    assert tool.directive_path(tasks.task_type) == "xlnet_tf.tasks.task_type.task_type"
    assert tool.directive_path(tasks.TaskType) == "xlnet_tf.tasks.task_type.TaskType"
    assert tool.directive_path(tasks.of_model) == "xlnet_tf.tasks.of_model"
    assert _resolve(tool.directive_path(tasks.task_type)) is tasks.task_type


@pytest.mark.parametrize("page", ["xlnet_tf/XLNetPacker.md"])
def test_a_name_several_packages_export_has_one_page_naming_each_import(page):
    with open(os.path.join(API_DIR, page), encoding="utf-8") as f:
        text = f.read()
    assert "`xlnet_tf.XLNetPacker`, `xlnet_tf.preprocessing.XLNetPacker`" in text
    with open(os.path.join(API_DIR, "preprocessing", "index.md"), encoding="utf-8") as f:
        assert "[`XLNetPacker`](../xlnet_tf/XLNetPacker.md)" in f.read()
