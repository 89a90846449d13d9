"""Build script. Everything but the package list lives in setup.cfg.

The top-level `configs/` folder (the source of truth for the run configs) is
shipped as the package `xlnet_tf.configs`, so `--config base` works after a
plain `pip install`; setup.cfg's `packages = find:` cannot add such a mapped
package, hence this file. The top-level `pipelines/` folder holds runnable scripts
only and is not installed: a generic top-level package named `pipelines` would
clash with other projects'; the Beam jobs' transforms ship as `xlnet_tf.beam`.
"""

from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["xlnet_tf", "xlnet_tf.*"])
    + ["xlnet_tf.configs"],
    package_dir={"xlnet_tf.configs": "configs"},
    package_data={"xlnet_tf.configs": ["pretrain/*.yaml", "finetune/*.yaml", "*/README.md"]},
)
