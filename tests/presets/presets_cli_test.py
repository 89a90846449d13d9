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
