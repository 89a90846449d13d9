"""What the package declares and ships: dependencies by need, configs as package data."""

import ast
import configparser
import os
import re
import subprocess
import sys
import zipfile

import pytest
from packaging.specifiers import SpecifierSet

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Import name -> distribution name, for every third-party module the package imports.
DISTRIBUTIONS = {
    "tensorflow": "tensorflow", "tensorflow_text": "tensorflow-text", "keras": "keras",
    "keras_hub": "keras-hub", "tensorflow_datasets": "tensorflow-datasets",
    "sentencepiece": "sentencepiece", "h5py": "h5py", "yaml": "pyyaml", "safetensors": "safetensors",
    "numpy": "numpy", "apache_beam": "apache-beam", "google_crc32c": "google-crc32c", "torch": "torch",
    "transformers": "transformers", "matplotlib": "matplotlib", "jax": "jax",
}


def _setup_cfg():
    parser = configparser.ConfigParser()
    parser.read(os.path.join(REPO, "setup.cfg"))
    return parser


def _names(block):
    return {re.split(r"[<>=!~ ;\[]", line.strip(), maxsplit=1)[0].lower()
            for line in block.strip().splitlines() if line.strip() and not line.strip().startswith("#")}


def _requirements():
    parser = _setup_cfg()
    extras = {name: _names(parser["options.extras_require"][name])
              for name in parser["options.extras_require"]}
    return _names(parser["options"]["install_requires"]), extras


def _absolute_imports(folder):
    """`(path, module)` for every absolute import in every `.py` file under `folder`."""
    for root, _, files in os.walk(os.path.join(REPO, folder)):
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = os.path.join(root, name)
            for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
                if isinstance(node, ast.Import):
                    for alias in node.names:
                        yield path, alias.name
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    yield path, node.module


def _imported_modules(folder):
    """Top-level names of every absolute import under `folder`, with one file that imports each."""
    found = {}
    for path, module in _absolute_imports(folder):
        found.setdefault(module.split(".")[0], path)
    return found


def _files_importing(folder, module):
    """Every `.py` file under `folder` with an absolute import of `module` (or one of its submodules)."""
    return sorted({path for path, name in _absolute_imports(folder) if name.split(".")[0] == module})


def test_core_install_has_no_beam_and_the_beam_and_test_extras_do():
    core, extras = _requirements()
    assert "apache-beam" not in core
    assert "apache-beam" in extras["beam"] and "apache-beam" in extras["test"]
    assert {"pytest", "pytest-xdist"} <= extras["test"]


def _lines(block):
    return [line.strip() for line in block.strip().splitlines() if line.strip() and not line.strip().startswith("#")]


def _specifier(requirement):
    """`SpecifierSet` of a requirement line such as `jax[cpu]>=0.10,<0.11`."""
    return SpecifierSet(re.split(r"(?=[<>=!~])", requirement, maxsplit=1)[1])


def test_the_backend_extras_are_ranges_and_the_test_extra_runs_every_backend():
    extras = _setup_cfg()["options.extras_require"]
    (jax,) = _lines(extras["jax"])
    (torch,) = _lines(extras["torch"])
    assert jax.startswith("jax[cpu]") and "0.10.2" in _specifier(jax)  # the JAX CI runs
    assert torch.startswith("torch") and "2.13.0" in _specifier(torch) and "==" not in torch
    test = _lines(extras["test"])
    assert jax in test, "the cross-backend tests need JAX in the test extra"
    # Pinned in the test extra: an unpinned torch resolves to the CUDA wheels.
    assert "torch==2.13.0" in test


def test_ci_runs_the_model_path_without_tensorflow_after_the_test_extra_pass():
    ci = open(os.path.join(REPO, ".ci", "run"), encoding="utf-8").read()
    full_suite = ci.index('run_pytest "$work/venv/bin/python" -m pytest -n 2 -p no:cacheprovider -m large')
    section = ci[ci.index('echo "=== pass 4'):]
    assert full_suite < ci.index(section)
    assert "tests/backends/no_tensorflow_test.py" in section
    for needed in ("KERAS_BACKEND=jax", 'if "$notf" -c "import tensorflow"', "--no-deps .", '--no-deps "$keras_hub"'):
        assert needed in section, needed


def test_ci_lints_with_the_ruff_of_the_test_extra():
    _, extras = _requirements()
    assert "ruff" in extras["test"]
    ci = open(os.path.join(REPO, ".ci", "run"), encoding="utf-8").read()
    install = ci.index('"$work/venv/bin/python" -m pip install --quiet ".[test]"')
    lint = ci.index('"$work/venv/bin/ruff" check .')
    assert install < lint < ci.index("run_pytest \"$work/venv/bin/python\" -m pytest")


def test_the_test_extra_brings_the_docs_tools_the_site_tests_build_with():
    # tests/docs/site_test.py runs `mkdocs build --strict`; the README's test command installs only `.[test]`.
    extras = _setup_cfg()["options.extras_require"]
    missing = set(_lines(extras["docs"])) - set(_lines(extras["test"]))
    assert not missing, f"add to the test extra: {missing}"


def test_every_imported_distribution_is_declared_and_every_declared_one_imported():
    core, extras = _requirements()
    imported = {**_imported_modules("xlnet_tf"), **_imported_modules("pipelines")}
    own = {"xlnet_tf", "pipelines"}
    third_party = {m: p for m, p in imported.items()
                   if m not in sys.stdlib_module_names and m not in own and not m.startswith("_")}
    unknown = {m: p for m, p in third_party.items() if m not in DISTRIBUTIONS}
    assert not unknown, f"add these imports to DISTRIBUTIONS and setup.cfg: {unknown}"
    declared = core | extras["beam"] | extras["jax"] | extras["torch"] | extras["test"]
    undeclared = {m: p for m, p in third_party.items() if DISTRIBUTIONS[m] not in declared}
    assert not undeclared, f"imported but not declared in setup.cfg: {undeclared}"
    used = {DISTRIBUTIONS[m] for m in third_party}
    assert core - used == set(), f"declared in install_requires but never imported: {core - used}"
    # Beam is only needed by the Beam jobs (and the quick start, which runs one); their transforms
    # live in the package (`xlnet_tf.beam`), so one wheel ships them to Dataflow workers.
    beam_users = _files_importing("xlnet_tf", "apache_beam") + _files_importing("pipelines", "apache_beam")
    assert beam_users, "no Beam job found"
    for path in beam_users:
        assert path.startswith(os.path.join(REPO, "xlnet_tf", "beam") + os.sep), path


def test_top_level_pipelines_folder_is_scripts_not_a_package():
    assert not os.path.exists(os.path.join(REPO, "pipelines", "__init__.py"))
    setup_py = open(os.path.join(REPO, "setup.py"), encoding="utf-8").read()
    assert 'find_packages(include=["xlnet_tf", "xlnet_tf.*"])' in setup_py
    for script, command in (("pretraining_data.py", "prepare_pretraining"),
                            ("finetuning_data.py", "prepare_finetuning")):
        source = open(os.path.join(REPO, "pipelines", script), encoding="utf-8").read()
        assert f"from xlnet_tf.cli.{command} import main" in source
    assert _setup_cfg()["options.entry_points"]["console_scripts"].split() == [
        "xlnet-tf", "=", "xlnet_tf.cli.main:main"]


def test_supported_versions_match_the_readme():
    options = _setup_cfg()["options"]
    assert options["python_requires"] == ">=3.11,<3.14"
    requires = options["install_requires"]
    assert "tensorflow>=2.20,<2.22" in requires and "tensorflow-text>=2.20.1,<2.22" in requires
    classifiers = _setup_cfg()["metadata"]["classifiers"]
    readme = open(os.path.join(REPO, "README.md"), encoding="utf-8").read()
    for version in ("3.11", "3.12", "3.13"):
        assert f"Programming Language :: Python :: {version}" in classifiers
        assert f"| {version} |" in readme


@pytest.mark.subprocess
@pytest.mark.slow
def test_wheel_ships_the_configs_and_names_work_after_a_normal_install(tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--quiet", "-w", str(wheels), REPO], check=True, cwd=tmp_path, timeout=300,
                   capture_output=True)
    (wheel,) = wheels.glob("xlnet_tf-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for kind, folder in (("pretrain", "pretrain"), ("finetune", "finetune")):
        expected = {f"xlnet_tf/configs/{folder}/{f}" for f in os.listdir(os.path.join(REPO, "configs", kind))}
        assert expected <= names, expected - names
    assert not any(name.startswith("xlnet_tf/resources/") for name in names)  # one copy of each config
    # No generic top-level `pipelines` package; the Beam transforms are in `xlnet_tf.beam`.
    assert not any(name.startswith("pipelines/") for name in names), sorted(
        n for n in names if n.startswith("pipelines/"))
    assert {"xlnet_tf/beam/__init__.py", "xlnet_tf/beam/pretraining_data.py",
            "xlnet_tf/beam/finetuning_data.py"} <= names
    top_level = next(n for n in names if n.endswith(".dist-info/top_level.txt"))
    assert zipfile.ZipFile(wheel).read(top_level).decode().split() == ["xlnet_tf"]
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "xlnet-tf = xlnet_tf.cli.main:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
    # A normal (non-editable) install, used from a directory without configs/.
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target",
                    str(target), str(wheel)], check=True, timeout=300, capture_output=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # The quick start's config is the shipped `tiny`, found from the installed package.
    script = ("import sys; sys.path.insert(0, sys.argv[1]); from xlnet_tf.cli import main as c; "
              "from xlnet_tf.training.shipped_configs import resolve_config; "
              "print(c.__file__); print(resolve_config('tiny', 'pretrain')); sys.exit(c.main(['configs']))")
    result = subprocess.run([sys.executable, "-c", script, str(target)], cwd=elsewhere,
                            capture_output=True, text=True, timeout=120,
                            env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == str(target / "xlnet_tf" / "cli" / "main.py")
    assert lines[1] == str(target / "xlnet_tf" / "configs" / "pretrain" / "tiny.yaml")
    assert lines[-1] == f"Files: {target / 'xlnet_tf' / 'configs'}"
    assert any(line.startswith("  glue_mrpc ") for line in lines)
