"""root: the directory relative file names of the block are resolved
against (``block.settings["root"]``, read through ``block.path(name)``;
default: the working directory).

A root that does not exist is allowed (it may appear later) with a
warning; one that exists but cannot be examined is an error.
"""

import os

from corednstw.core import logger
from corednstw.core.plugin import Plugin


class Root(Plugin):
    name = "root"
    in_chain = False

    def __init__(self, path):
        self.path = path


def setup(d, block):
    """``root PATH``: one argument, no block."""
    root = d.one()
    d.no_block()
    try:
        os.stat(root)
    except FileNotFoundError:
        logger.warning("root", "Root path does not exist: %s" % root)
    except OSError as e:
        raise d.error("unable to access root path '%s': %s"
                      % (root, e.strerror or e)) from e
    block.settings["root"] = root
    return Root(root)
