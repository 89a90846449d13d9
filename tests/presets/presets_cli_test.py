"""`xlnet-tf presets`: the listing and --download."""

import os

from tests.presets.conftest import RELEASE_ARCHIVE, release_zip_bytes
from xlnet_tf.cli import main as cli


def rows(output):
    return {line.split()[0]: line for line in output.splitlines()[1:-1]}


def test_listing_then_download(server, presets_dir, capsys):
    assert cli.main(["presets"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["NAME", "SOURCE", "SIZE", "CACHED", "DESCRIPTION"]
    listed = rows(out)
    assert list(listed) == ["xlnet_base_cased", "xlnet_large_cased", "hf_xlnet_base_cased", "hf_xlnet_large_cased"]
    assert f"original release ({RELEASE_ARCHIVE})" in listed["xlnet_base_cased"]
    assert "Hugging Face xlnet/xlnet-large-cased" in listed["hf_xlnet_large_cased"]
    assert all("  no  " in line for line in listed.values())
    assert out.splitlines()[-1].startswith(f"cache: {presets_dir}")

    server.add_gcs_object("/xlnet/released_models/" + RELEASE_ARCHIVE, release_zip_bytes())
    assert cli.main(["presets", "--download", "xlnet_base_cased"]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == f"xlnet_base_cased: {os.path.join(presets_dir, 'xlnet_base_cased')}"
    assert "cased_L-12_H-768_A-12.zip:" in captured.err  # Progress lines.

    assert cli.main(["presets"]) == 0
    listed = rows(capsys.readouterr().out)
    assert "  yes  " in listed["xlnet_base_cased"]
    assert "  no  " in listed["hf_xlnet_base_cased"]


def test_download_of_unknown_name_fails_with_the_names(server, capsys):
    assert cli.main(["presets", "--download", "xlnet_huge"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("xlnet-tf presets: Unknown preset 'xlnet_huge'")
    assert "Known presets: xlnet_base_cased, xlnet_large_cased, hf_xlnet_base_cased, hf_xlnet_large_cased" in err


def _damage(path, keep_size=False):
    data = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(data[:-100] + bytes(100) if keep_size else data[: len(data) // 2])


def test_damaged_cache_entry_is_named_listed_and_refetched_on_request(server, presets_dir, capsys):
    import json

    from xlnet_tf import XLNetBackbone
    from xlnet_tf.presets import PresetError, resolve_preset

    server.add_gcs_object("/xlnet/released_models/" + RELEASE_ARCHIVE, release_zip_bytes())
    assert cli.main(["presets", "--download", "xlnet_base_cased"]) == 0
    entry = os.path.join(presets_dir, "xlnet_base_cased")
    manifest = json.load(open(os.path.join(entry, "preset_manifest.json")))
    assert {r["path"] for r in manifest["preset_files"]} >= {"config.json", "model.weights.h5",
                                                             "assets/tokenizer/vocabulary.spm"}
    expected = XLNetBackbone.from_preset("xlnet_base_cased").get_weights()
    capsys.readouterr()

    _damage(os.path.join(entry, "model.weights.h5"))
    fix = ("Download it again with `xlnet-tf presets --download xlnet_base_cased --force` "
           "(Python: `xlnet_tf.presets.download_preset('xlnet_base_cased', force=True)`).")
    for load in (lambda: XLNetBackbone.from_preset("xlnet_base_cased"), lambda: XLNetBackbone.from_preset(entry)):
        try:
            load()
            raise AssertionError("a damaged entry was loaded")
        except PresetError as e:
            message = str(e)
        assert message.startswith(f"Preset 'xlnet_base_cased': the cached copy in {entry} is damaged "
                                  "(model.weights.h5: ") and "bytes, the manifest records" in message
        assert message.endswith(fix)

    assert cli.main(["presets"]) == 0
    out = capsys.readouterr().out
    assert "  damaged  " in rows(out)["xlnet_base_cased"] and out.rstrip().endswith(fix)
    assert cli.main(["presets", "--download", "xlnet_base_cased"]) == 1  # no broken entry handed back
    assert capsys.readouterr().err.rstrip().endswith(fix)

    assert cli.main(["presets", "--download", "xlnet_base_cased", "--force"]) == 0
    capsys.readouterr()
    assert cli.main(["presets"]) == 0
    assert "  yes  " in rows(capsys.readouterr().out)["xlnet_base_cased"]
    for actual, want in zip(XLNetBackbone.from_preset("xlnet_base_cased").get_weights(), expected):
        assert (actual == want).all()

    # Same size, other bytes: only the sha256 tells.
    _damage(os.path.join(entry, "assets", "tokenizer", "vocabulary.spm"), keep_size=True)
    try:
        resolve_preset("xlnet_base_cased")
        raise AssertionError("a damaged entry was resolved")
    except PresetError as e:
        assert "(assets/tokenizer/vocabulary.spm: sha256 " in str(e) and ", the manifest records " in str(e)


def test_entry_without_file_records_is_damaged(server, presets_dir):
    import json

    from xlnet_tf.presets import PresetError, resolve_preset

    server.add_gcs_object("/xlnet/released_models/" + RELEASE_ARCHIVE, release_zip_bytes())
    entry = resolve_preset("xlnet_base_cased")
    manifest_path = os.path.join(entry, "preset_manifest.json")
    manifest = json.load(open(manifest_path))
    del manifest["preset_files"]
    json.dump(manifest, open(manifest_path, "w"))
    try:
        resolve_preset("xlnet_base_cased")
        raise AssertionError("an entry without file records was resolved")
    except PresetError as e:
        assert "is damaged (preset_manifest.json records no preset_files)" in str(e) and "--force" in str(e)
