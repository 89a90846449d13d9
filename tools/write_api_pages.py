"""Writes the API reference pages of the docs site (`docs/api/`) from the packages' `__all__`.

One page per public class or function: the names in `xlnet_tf.__all__` and in the `__all__` of each
subpackage that has one. A name exported by several packages (for example `XLNetPacker`, in `xlnet_tf` and
`xlnet_tf.preprocessing`) gets one page, under the first package that exports it (`xlnet_tf`, then the
subpackages in alphabetical order); the other packages' index pages link to it. Each page holds a
mkdocstrings directive naming the object where it is defined, since the packages export their names lazily
and the documentation builder reads the source without importing it. A function that a package defines under
the name of one of its submodules (`xlnet_tf.tasks.task_type`, next to the module `xlnet_tf/tasks/task_type.py`)
is named `package.name.name`: the builder (Griffe) keeps one object per path, the submodule, so
`docs/extensions/docstring_sections.py` files the function there and the page names it there, apart from
the module's classes, which keep their own pages.

Run from the repository root after changing an `__all__`:

    python tools/write_api_pages.py          # rewrite docs/api/ (each file atomically; stale pages removed)
    python tools/write_api_pages.py --check  # exit 1 and name the differences if docs/api/ is out of date

`tests/docs/api_pages_test.py` runs the check.
"""

import argparse
import importlib
import importlib.util
import inspect
import os
import pkgutil
import sys
import tempfile

# Importing the packages loads TensorFlow; its start-up notices are not this script's output.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

ROOT = "xlnet_tf"
API_DIR = os.path.join("docs", "api")
GENERATED_NOTE = "<!-- Written by tools/write_api_pages.py from the packages' __all__; do not edit. -->\n"


def public_packages():
    """`xlnet_tf` and each of its subpackages that defines `__all__`, in that order (then alphabetical)."""
    package = importlib.import_module(ROOT)
    names = sorted(info.name for info in pkgutil.walk_packages(package.__path__, ROOT + ".") if info.ispkg)
    return [ROOT] + [name for name in names if hasattr(importlib.import_module(name), "__all__")]


def directive_path(obj):
    """The path a page's `:::` directive names for `obj`: `module.qualname` where it is defined.

    A package's function named like one of its submodules is `package.name.name` (see the module docstring).
    """
    path = f"{obj.__module__}.{obj.__qualname__}"
    if hasattr(sys.modules[obj.__module__], "__path__") and importlib.util.find_spec(path) is not None:
        return f"{path}.{obj.__name__}"
    return path


def public_api():
    """`[(package, [(public_name, defining_path, kind)])]`: the classes and functions each package exports.

    `defining_path` is `directive_path(obj)`; `kind` is "class" or "function".
    Other names in `__all__` (such as `__version__`) have no page.
    """
    api = []
    for package_name in public_packages():
        package = importlib.import_module(package_name)
        entries = []
        for name in package.__all__:
            obj = getattr(package, name)
            if inspect.isclass(obj) or inspect.isfunction(obj):
                kind = "class" if inspect.isclass(obj) else "function"
                entries.append((name, directive_path(obj), kind))
        api.append((package_name, sorted(entries, key=lambda entry: entry[0].lower())))
    return api


def package_folder(package_name):
    """The folder of a package's pages under docs/api: `xlnet_tf` or the subpackage's last name."""
    return ROOT if package_name == ROOT else package_name.rsplit(".", 1)[1]


def page_paths(api=None):
    """`{defining_path: page path relative to docs/api}`: where each public object's page lives."""
    paths = {}
    for package_name, entries in api or public_api():
        for name, defining_path, _ in entries:
            paths.setdefault(defining_path, f"{package_folder(package_name)}/{name}.md")
    return paths


def api_pages(api=None):
    """`{path relative to docs/api: markdown}`: every page of the API reference, index pages included."""
    api = api or public_api()
    paths = page_paths(api)
    exported_as = {}
    for package_name, entries in api:
        for name, defining_path, _ in entries:
            exported_as.setdefault(defining_path, []).append(f"{package_name}.{name}")
    pages = {}
    index = [GENERATED_NOTE, "# API reference\n",
             "One page per public class and function, by the package that exports it.\n"]
    for package_name, entries in api:
        folder = package_folder(package_name)
        package_doc = inspect.getdoc(importlib.import_module(package_name)) or ""
        summary = package_doc.split("\n\n")[0].replace("\n", " ")
        index.append(f"- [`{package_name}`]({folder}/index.md): {summary}")
        lines = [GENERATED_NOTE, f"# `{package_name}`\n", f"{summary}\n", "| name | kind |", "|---|---|"]
        for name, defining_path, kind in entries:
            target = os.path.relpath(paths[defining_path], folder)
            lines.append(f"| [`{name}`]({target}) | {kind} |")
            if paths[defining_path] != f"{folder}/{name}.md":
                continue
            names = ", ".join(f"`{exported}`" for exported in exported_as[defining_path])
            pages[paths[defining_path]] = (
                f"{GENERATED_NOTE}# {name}\n\nImport as {names}.\n\n::: {defining_path}\n")
        pages[f"{folder}/index.md"] = "\n".join(lines) + "\n"
    pages["index.md"] = "\n".join(index) + "\n"
    return pages


def write_atomically(path, text):
    """Writes `text` to `path` through a temporary file in the same folder and a rename."""
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=".tmp-", suffix=".md", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def existing_pages(api_dir):
    """The markdown files under `api_dir`, as paths relative to it."""
    found = set()
    for folder, _, files in os.walk(api_dir):
        for file_name in files:
            if file_name.endswith(".md"):
                found.add(os.path.relpath(os.path.join(folder, file_name), api_dir).replace(os.sep, "/"))
    return found


def differences(api_dir, pages):
    """Human-readable differences between the pages on disk and `pages`; empty when up to date."""
    on_disk = existing_pages(api_dir)
    problems = [f"missing page: {path}" for path in sorted(set(pages) - on_disk)]
    problems += [f"page for a name no __all__ exports: {path}" for path in sorted(on_disk - set(pages))]
    for path in sorted(on_disk & set(pages)):
        with open(os.path.join(api_dir, path), encoding="utf-8") as f:
            if f.read() != pages[path]:
                problems.append(f"out of date: {path}")
    return problems


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when docs/api is out of date")
    parser.add_argument("--api-dir", default=API_DIR, help="where the pages go (default: docs/api)")
    args = parser.parse_args(argv)
    pages = api_pages()
    if args.check:
        problems = differences(args.api_dir, pages)
        for problem in problems:
            print(problem, file=sys.stderr)
        if problems:
            print("Run `python tools/write_api_pages.py` to rewrite docs/api.", file=sys.stderr)
        return 1 if problems else 0
    for path in existing_pages(args.api_dir) - set(pages):
        os.unlink(os.path.join(args.api_dir, path))
    for path, text in pages.items():
        write_atomically(os.path.join(args.api_dir, path), text)
    print(f"Wrote {len(pages)} pages into {args.api_dir}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
