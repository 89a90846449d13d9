"""The error every preset lookup, download, check and conversion raises."""


class PresetError(ValueError):
    """A preset name is unknown, or its download, integrity check or conversion failed.

    The message names the preset, the file or URL concerned and, for a failed
    check, the expected and the received value. When it is raised no cache entry
    has been written (entries appear only once complete).
    """
