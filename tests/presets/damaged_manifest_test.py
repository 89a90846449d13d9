"""A damaged cache manifest or cache folder: named with the fix by the listing, `--download` and every loader."""

import json
import os

import pytest

from tests.presets.conftest import RELEASE_ARCHIVE, release_zip_bytes
from xlnet_tf.cli import main as cli
from xlnet_tf.presets import PresetError, preset_cache, read_manifest, resolve_preset

NAME = "xlnet_base_cased"
RECORD = {"path": "config.json", "size": 12, "sha256": "ab" * 32}


def manifest_with(**changes):
    """A manifest whose one `preset_files` record has `changes` applied (a value of None drops the key)."""
    record = {key: value for key, value in {**RECORD, **changes}.items() if value is not None}
    return json.dumps({"name": NAME, "preset_files": [record]}).encode()


def damaged(entry, problem):
    return (f"Preset '{NAME}': the cached copy in {entry} is damaged ({problem}). Download it again with "
            f"`xlnet-tf presets --download {NAME} --force` "
            f"(Python: `xlnet_tf.presets.download_preset('{NAME}', force=True)`).")


def snapshot(path):
    """Every file under `path` (or the file itself) with its bytes: what must survive a refusal."""
    if os.path.isfile(path):
        return open(path, "rb").read()
    return {os.path.relpath(os.path.join(root, name), path): open(os.path.join(root, name), "rb").read()
            for root, _, names in os.walk(path) for name in names}


def assert_refused_everywhere(entry, message, server, capsys, by_path=True):
    """The listing marks the entry damaged (exit 0), `--download` and the Python API refuse it; nothing is lost.

    `by_path`: `resolve_preset(entry)` refuses it too (an entry with a manifest; a folder without one is a
    preset folder like any other when named by its path).
    """
    before = snapshot(entry)
    capsys.readouterr()
    assert cli.main(["presets"]) == 0
    captured = capsys.readouterr()
    assert "  damaged  " in captured.out.splitlines()[1] and captured.out.splitlines()[1].startswith(NAME)
    assert captured.out.splitlines()[-1] == message and captured.err == ""
    assert cli.main(["presets", "--download", NAME]) == 1
    assert capsys.readouterr().err == f"xlnet-tf presets: {message}\n"
    reads = [lambda: resolve_preset(NAME), lambda: read_manifest(NAME)]
    if by_path:
        reads.append(lambda: resolve_preset(entry))
    for read in reads:
        with pytest.raises(PresetError) as error:
            read()
        assert str(error.value) == message
    assert sum(server.requests.values()) == 0
    assert snapshot(entry) == before


@pytest.mark.parametrize("content, problem", [
    (b"[]", "preset_manifest.json holds [] (a list), expected a JSON object with preset_files"),
    (b'"preset"', 'preset_manifest.json holds "preset" (a string), expected a JSON object with preset_files'),
    (b"3", "preset_manifest.json holds 3 (a number), expected a JSON object with preset_files"),
    (b"null", "preset_manifest.json holds null, expected a JSON object with preset_files"),
    (b'{"preset_files": {"config.json": 12}}',
     'preset_manifest.json: preset_files is {"config.json": 12} (an object), expected a list of objects with path, '
     'size and sha256'),
    (b'{"preset_files": [3]}',
     "preset_manifest.json: preset_files[0] is 3 (a number), expected an object with path, size and sha256"),
    (manifest_with(size=None),
     "preset_manifest.json: preset_files[0] has no size, expected a whole number of bytes >= 0"),
    (manifest_with(size="12"),
     'preset_manifest.json: preset_files[0].size is "12" (a string), expected a whole number of bytes >= 0'),
    (manifest_with(size=-1), "preset_manifest.json: preset_files[0].size is -1, expected a whole number of bytes >= 0"),
    (manifest_with(size=True),
     "preset_manifest.json: preset_files[0].size is true (a boolean), expected a whole number of bytes >= 0"),
    (manifest_with(path=None), "preset_manifest.json: preset_files[0] has no path, expected a relative path inside "
                               "the entry"),
    (manifest_with(path="../../secret"),
     'preset_manifest.json: preset_files[0].path is "../../secret", expected a relative path inside the entry'),
    (manifest_with(sha256="AB" * 32),
     f'preset_manifest.json: preset_files[0].sha256 is "{"AB" * 32}", expected 64 '
     'lowercase hex digits'),
    (b"\xff\xfe{}", "preset_manifest.json is not UTF-8 text (byte 0xff at offset 0)"),
    (b'{"preset_files": [', "preset_manifest.json is not valid JSON (Expecting value: line 1 column 19 (char 18))"),
    (b"", "preset_manifest.json is empty"),
    (b" \n", "preset_manifest.json is empty"),
], ids=["list", "string", "number", "null", "files_object", "record_number", "no_size", "size_string", "size_negative",
        "size_boolean", "no_path", "path_outside", "sha256_uppercase", "not_utf8", "not_json", "empty", "blank"])
def test_damaged_manifest_is_named_with_the_fix(content, problem, server, presets_dir, capsys):
    entry = os.path.join(presets_dir, NAME)
    os.makedirs(entry)
    with open(os.path.join(entry, "preset_manifest.json"), "wb") as f:
        f.write(content)
    assert_refused_everywhere(entry, damaged(entry, problem), server, capsys)


def test_unreadable_manifest_is_named(server, presets_dir, capsys):
    entry = os.path.join(presets_dir, NAME)
    os.makedirs(os.path.join(entry, "preset_manifest.json"))  # Unreadable as a file, for root too.
    assert_refused_everywhere(entry, damaged(entry, "preset_manifest.json cannot be read (Is a directory)"), server,
                              capsys)


def test_entry_that_is_a_file_is_damaged_and_kept(server, presets_dir, capsys):
    entry = os.path.join(presets_dir, NAME)
    os.makedirs(presets_dir)
    with open(entry, "w") as f:
        f.write("notes")
    assert_refused_everywhere(entry, damaged(entry, "it is not a directory"), server, capsys, by_path=False)


def test_loaders_refuse_a_damaged_manifest(server, presets_dir):
    from xlnet_tf import XLNetBackbone

    entry = os.path.join(presets_dir, NAME)
    os.makedirs(entry)
    with open(os.path.join(entry, "preset_manifest.json"), "wb") as f:
        f.write(manifest_with(size=None))
    message = damaged(entry, "preset_manifest.json: preset_files[0] has no size, expected a whole number of bytes >= 0")
    for preset in (NAME, entry):
        with pytest.raises(PresetError) as error:
            XLNetBackbone.from_preset(preset)
        assert str(error.value) == message
    assert sum(server.requests.values()) == 0


def test_entry_without_manifest_is_kept_until_force_replaces_it(server, presets_dir, capsys):
    entry = os.path.join(presets_dir, NAME)
    os.makedirs(entry)
    with open(os.path.join(entry, "my_notes.txt"), "w") as f:
        f.write("mine")
    assert_refused_everywhere(entry, damaged(entry, "preset_manifest.json is missing"), server, capsys,
                              by_path=False)

    server.add_gcs_object("/xlnet/released_models/" + RELEASE_ARCHIVE, release_zip_bytes())
    assert cli.main(["presets", "--download", NAME, "--force"]) == 0
    assert capsys.readouterr().out == f"{NAME}: {entry}\n"
    assert not os.path.exists(os.path.join(entry, "my_notes.txt"))
    assert {record["path"] for record in read_manifest(NAME)["preset_files"]} >= {"config.json", "model.weights.h5"}
    assert cli.main(["presets"]) == 0
    assert "  yes  " in capsys.readouterr().out.splitlines()[1]


@pytest.mark.parametrize("file_in_the_way", ["home", os.path.join("home", "presets")])
def test_cache_folder_that_is_a_file_is_a_usage_error(file_in_the_way, server, tmp_path, capsys):
    path = tmp_path / file_in_the_way
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("not a folder")
    presets = tmp_path / "home" / "presets"
    message = (f"The preset cache {presets} cannot be used: {path} exists and is not a directory. Move it out of the "
               "way, or set $XLNET_TF_HOME to a directory.")
    for argv in (["presets"], ["presets", "--download", NAME]):
        assert cli.main(argv) == 2
        captured = capsys.readouterr()
        assert (captured.out, captured.err) == ("", f"xlnet-tf presets: {message}\n")
    with pytest.raises(PresetError) as error:
        resolve_preset(NAME)
    assert str(error.value) == message
    assert path.read_text() == "not a folder" and sum(server.requests.values()) == 0


def test_cache_folder_made_by_another_first_use_meanwhile_is_no_problem(tmp_path, monkeypatch):
    # Two first uses at once: the other one makes the folder between this one's `isdir` and `lexists`.
    monkeypatch.setenv("XLNET_TF_HOME", str(tmp_path / "home"))
    presets = tmp_path / "home" / "presets"
    lexists = os.path.lexists

    def lexists_after_the_other_use(path):
        presets.mkdir(parents=True, exist_ok=True)
        return lexists(path)

    monkeypatch.setattr(preset_cache.os.path, "lexists", lexists_after_the_other_use)
    assert preset_cache.cache_location_problem() is None
    preset_cache.check_cache_location()
    assert presets.is_dir()
