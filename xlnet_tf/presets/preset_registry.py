"""The named presets: where each one is downloaded from and what is checked.

Two kinds of source:

- `"tf1_release"`: a zip of the original zihangdai/xlnet release on Google Cloud
  Storage (`<base>/<archive>`, base `https://storage.googleapis.com/xlnet/released_models`,
  overridden by `$XLNET_TF_RELEASE_BASE_URL`); the zip holds one folder with
  `xlnet_model.ckpt.*`, `xlnet_config.json` and `spiece.model`.
- `"hf"`: files of a Hugging Face model repository, each from
  `<base>/<repo>/resolve/<revision>/<file>`, base `https://huggingface.co`
  (overridden by `$XLNET_TF_HF_BASE_URL`, else `$HF_ENDPOINT`).

`sha256` / `size` of a `PresetFile` are checked when recorded. The built-in
entries record none: they could not be measured from a machine without internet
access and no public source states them; every download is still checked
against what the server states (see `download_file.py`).
"""

import dataclasses
import difflib
import os
import re

from xlnet_tf.formats.preset_files import TRANSFORMERS_FILES
from xlnet_tf.presets.preset_error import PresetError

RELEASE_BASE_URL_ENV = "XLNET_TF_RELEASE_BASE_URL"
HF_BASE_URL_ENV = "XLNET_TF_HF_BASE_URL"
DEFAULT_RELEASE_BASE_URL = "https://storage.googleapis.com/xlnet/released_models"
DEFAULT_HF_BASE_URL = "https://huggingface.co"
SOURCES = ("tf1_release", "hf")


@dataclasses.dataclass(frozen=True)
class PresetFile:
    """One file to download.

    Args:
        name: the file name at the source (and in the download folder).
        sha256: the expected sha256 (hex), or None when not recorded.
        size: the expected size in bytes, or None when not recorded.
    """

    name: str
    sha256: str = None
    size: int = None


@dataclasses.dataclass(frozen=True)
class PresetSpec:
    """A named preset: its source, its files and a one-line description.

    Args:
        name: the name `resolve_preset` and `xlnet-tf presets --download` accept.
        source: `"tf1_release"` (a zip of the original release) or `"hf"` (a Hugging Face repo).
        location: the archive name (`tf1_release`) or the `owner/repo` (`hf`).
        files: the `PresetFile`s to download (one zip, or `config.json`, `model.safetensors`, `spiece.model`).
        description: one line for `xlnet-tf presets`.
        approximate_size: the approximate download size for the listing (an estimate, never a check).
        revision: `hf` only: the branch, tag or commit of the repository.

    Example:
    >>> from xlnet_tf.presets import get_preset_spec
    >>> spec = get_preset_spec("hf_xlnet_base_cased")
    >>> spec.file_url("config.json", base_url="https://huggingface.co")
    'https://huggingface.co/xlnet/xlnet-base-cased/resolve/main/config.json'
    """

    name: str
    source: str
    location: str
    files: tuple
    description: str
    approximate_size: str = "?"
    revision: str = "main"

    def __post_init__(self):
        if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", self.name):
            raise ValueError(f"Preset name {self.name!r}: use letters, digits, '_', '-' and '.' only "
                             "(it names the cache directory).")
        if self.source not in SOURCES:
            raise ValueError(f"Preset {self.name!r}: source must be one of {SOURCES}, got {self.source!r}.")

    def base_url(self):
        """The base URL for this preset's source, after the environment overrides."""
        if self.source == "tf1_release":
            return os.environ.get(RELEASE_BASE_URL_ENV) or DEFAULT_RELEASE_BASE_URL
        return os.environ.get(HF_BASE_URL_ENV) or os.environ.get("HF_ENDPOINT") or DEFAULT_HF_BASE_URL

    def file_url(self, file_name, base_url=None):
        """The URL of one of this preset's files."""
        base = (base_url or self.base_url()).rstrip("/")
        if self.source == "tf1_release":
            return f"{base}/{file_name}"
        return f"{base}/{self.location}/resolve/{self.revision}/{file_name}"

    @property
    def source_label(self):
        """A short human name of the source for listings."""
        if self.source == "tf1_release":
            return f"original release ({self.location})"
        return f"Hugging Face {self.location}"


def _release(name, archive, description, approximate_size):
    return PresetSpec(name=name, source="tf1_release", location=archive, files=(PresetFile(archive),),
                      description=description, approximate_size=approximate_size)


def _hugging_face(name, repo, description, approximate_size):
    files = tuple(PresetFile(name) for name in TRANSFORMERS_FILES)
    return PresetSpec(name=name, source="hf", location=repo, files=files, description=description,
                      approximate_size=approximate_size)


# Sizes are float32 weights at the published parameter counts (about 117M and 361M), not checks.
_BUILT_IN = (
    _release("xlnet_base_cased", "cased_L-12_H-768_A-12.zip",
             "XLNet-Base cased, original TF1 release: 12 layers, hidden 768, 12 heads", "~0.5 GB"),
    _release("xlnet_large_cased", "cased_L-24_H-1024_A-16.zip",
             "XLNet-Large cased, original TF1 release: 24 layers, hidden 1024, 16 heads", "~1.4 GB"),
    _hugging_face("hf_xlnet_base_cased", "xlnet/xlnet-base-cased",
                  "XLNet-Base cased from Hugging Face (safetensors): 12 layers, hidden 768", "~0.5 GB"),
    _hugging_face("hf_xlnet_large_cased", "xlnet/xlnet-large-cased",
                  "XLNet-Large cased from Hugging Face (safetensors): 24 layers, hidden 1024", "~1.4 GB"),
)

PRESETS = {spec.name: spec for spec in _BUILT_IN}


def preset_names():
    """The known preset names, in registration order."""
    return list(PRESETS)


def register_preset(spec):
    """Adds (or replaces) a named preset, e.g. a mirror of a release; returns `spec`."""
    if not isinstance(spec, PresetSpec):
        raise TypeError(f"register_preset expects a PresetSpec, got {type(spec).__name__}.")
    PRESETS[spec.name] = spec
    return spec


def unknown_preset_message(name):
    """The message for a name that is neither a preset directory nor a known preset."""
    known = preset_names()
    close = difflib.get_close_matches(str(name).replace("-", "_").lower(), known, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return (f"Unknown preset {name!r}: not an existing preset directory and not a known preset name.{hint} "
            f"Known presets: {', '.join(known)} (`xlnet-tf presets` lists them).")


def get_preset_spec(name):
    """The `PresetSpec` called `name`; a `PresetError` listing the known names otherwise."""
    if name not in PRESETS:
        raise PresetError(unknown_preset_message(name))
    return PRESETS[name]
