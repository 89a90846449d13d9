"""The built documentation site, read as HTML the way a reader meets it.

One strict `mkdocs build` per module (`site` fixture); each test reads its pages through `site_pages.py`:
no doctest prompt rendered as a blockquote, a constructor signature on every public model, task,
preprocessor and tokenizer page, argument types, links between API pages, inherited `from_preset` on every
task page, every object on one page only, every public subpackage in the navigation, the presets page against
the registry, and every example of the API pages run as pasted into a fresh interpreter (each in its own
namespace and working directory, nothing injected) without an error; an example that starts with
`# skip-example: REASON` is not run.
"""

import inspect
import os
import re

import pytest

from tests.docs import examples, site_pages

PUBLIC = examples.public_objects()
# The share of documented arguments (variadic `*args` / `**kwargs` aside) whose table shows a type: from the
# signature, from `name (type):` in the docstring, or read off the docstring by docs/extensions.
TYPED_ARGUMENTS_FLOOR = 0.90
MIN_LINKS_BETWEEN_PAGES = 50


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    site_dir = tmp_path_factory.mktemp("site")
    site_pages.build_site(site_dir)
    return str(site_dir)


@pytest.fixture(scope="module")
def pages(site):
    return site_pages.api_pages(site)


def _page_of(public_name, obj, pages):
    """The API page (relative to api/) of a public object: its folder's page named after it."""
    name = public_name.rsplit(".", 1)[1]
    matches = [page for page in pages if page.rsplit("/", 1)[1] == name]
    assert matches, f"no API page for {public_name}"
    return matches[0]


def _is_model_class(obj):
    import keras

    return inspect.isclass(obj) and (issubclass(obj, keras.layers.Layer) or obj.__name__.endswith(
        ("Tokenizer", "Preprocessor", "Packer")))


def test_no_doctest_prompt_is_rendered_as_a_blockquote(pages):
    quoted = {page: site_pages.prompts_in_blockquotes(article) for page, article in pages.items()}
    assert not {page: found for page, found in quoted.items() if found}


def test_every_model_task_preprocessor_and_tokenizer_page_shows_its_constructor_signature(pages):
    missing = []
    for public_name, obj in PUBLIC:
        if _is_model_class(obj):
            page = _page_of(public_name, obj, pages)
            if not site_pages.has_signature(pages[page], obj.__name__):
                missing.append(page)
    assert not missing, f"pages without a constructor signature: {missing}"
    assert sum(_is_model_class(obj) for _, obj in PUBLIC) >= 10


def test_documented_arguments_show_their_types(pages):
    rows = [row for article in pages.values() for row in site_pages.argument_rows(article)
            if not row[0].startswith("*")]
    typed = [name for name, kind in rows if kind]
    assert len(rows) > 300
    assert len(typed) / len(rows) >= TYPED_ARGUMENTS_FLOOR, (
        f"{len(typed)} of {len(rows)} documented arguments show a type")


def test_api_pages_link_to_each_other(pages):
    links = sum(len(site_pages.links_to_other_pages(article, page)) for page, article in pages.items())
    assert links >= MIN_LINKS_BETWEEN_PAGES


def test_every_task_page_documents_from_preset(pages):
    from xlnet_tf import XLNetTask

    tasks = [(name, obj) for name, obj in PUBLIC if inspect.isclass(obj) and issubclass(obj, XLNetTask)]
    assert len(tasks) >= 5
    for public_name, obj in tasks:
        article = pages[_page_of(public_name, obj, pages)]
        path = f"{obj.__module__}.{obj.__qualname__}"
        for member in ("from_preset", "save_to_preset"):
            assert site_pages.documents_member(article, path, member), f"{public_name} page lacks {member}"


def test_every_public_subpackage_is_in_the_navigation(site):
    tool = examples.api_pages_tool()
    targets = site_pages.navigation_targets(site)
    for package in tool.public_packages():
        assert f"api/{tool.package_folder(package)}/" in targets, f"{package} is not in the navigation"
    assert "presets/" in targets


def test_the_presets_page_lists_every_registered_preset():
    from xlnet_tf.presets import get_preset_spec, preset_names

    with open(os.path.join(site_pages.REPO, "docs", "presets.md"), encoding="utf-8") as f:
        page = f.read()
    for name in preset_names():
        spec = get_preset_spec(name)
        row = next((line for line in page.splitlines() if line.startswith(f"| `{name}` |")), None)
        assert row is not None, f"docs/presets.md has no row for {name}"
        assert spec.approximate_size in row


def test_example_extraction_reads_prompts_and_continuations():
    block = ">>> import math\n>>> round(math.pi,\n...       2)\n3.14\n>>>\n>>> x = 1"
    assert site_pages.example_code(block) == "import math\nround(math.pi,\n      2)\n\nx = 1"


def test_a_page_example_that_uses_an_unimported_name_is_caught(tmp_path):
    failures = site_pages.run_examples(["import math\nmath.sqrt(4)", "np.zeros(3)"], cwd=str(tmp_path))
    assert failures == [(1, "NameError", "name 'np' is not defined")]


def _public_name(page):
    """The public name of an API page (`serving/SavedModelPredictor` -> `xlnet_tf.serving.SavedModelPredictor`)."""
    folder, name = page.split("/")
    return f"xlnet_tf.{name}" if folder == "xlnet_tf" else f"xlnet_tf.{folder}.{name}"


def test_each_object_is_documented_on_one_page(pages):
    # A page that renders another page's object (a function named like its module, say) repeats its anchors.
    pages_of = {}
    for page, article in pages.items():
        for anchor in set(re.findall(r'<h\d[^>]* id="(xlnet_tf\.[\w.]+)"', article)):
            pages_of.setdefault(anchor, set()).add(page)
    assert {anchor: sorted(found) for anchor, found in pages_of.items() if len(found) > 1} == {}
    assert re.search(r'id="xlnet_tf\.tasks\.[\w.]*task_type"', pages["tasks/task_type"])
    assert 'id="xlnet_tf.tasks.task_type.TaskType"' not in pages["tasks/task_type"]


@pytest.mark.large
def test_every_api_page_example_runs_as_pasted(pages, example_workdir, tmp_path, request):
    from tests.docs.example_context import link_artifacts

    found = [(page, code) for page, article in sorted(pages.items()) for code in site_pages.page_examples(article)
             if not site_pages.skip_reason(code)]
    assert len(found) >= 50
    # Each example gets its own working directory: the shared files, and the earlier outputs its page starts from.
    workdirs = []
    for index, (page, _) in enumerate(found):
        workdir = tmp_path / f"example-{index}"
        workdir.mkdir()
        for entry in os.listdir(example_workdir):
            os.symlink(example_workdir / entry, workdir / entry)
        link_artifacts(request, workdir, _public_name(page))
        workdirs.append(workdir)
    failures = site_pages.run_examples([code for _, code in found], cwd=workdirs, timeout=1800)
    problems = [(found[index][0], f"{kind}: {message}") for index, kind, message in failures]
    assert not problems, f"{len(problems)} examples fail as pasted into a fresh interpreter: {problems}"
