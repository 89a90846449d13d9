"""Build script. Everything but the package list lives in setup.cfg.

The top-level `configs/` folder (the source of truth for the run configs) is
shipped as the package `xlnet_tf.configs`, so `--config base` works after a
plain `pip install`; setup.cfg's `packages = find:` cannot add such a mapped
package, hence this file.
"""

from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["xlnet_tf", "xlnet_tf.*", "pipelines", "pipelines.*"])
    + ["xlnet_tf.configs"],
    package_dir={"xlnet_tf.configs": "configs"},
    package_data={"xlnet_tf.configs": ["pretrain/*.yaml", "finetune/*.yaml", "*/README.md"]},
)
