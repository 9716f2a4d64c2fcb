"""The installed package holds every plugin module: the package list that
setup.cfg's find rules produce covers every corednstw package and the
twistd plugin (which has no __init__.py, as Twisted wants)."""

import configparser
import os

from setuptools import find_namespace_packages
from twisted.trial import unittest

from tests.support import util


class PackagesTest(unittest.TestCase):

    def test_every_package_found(self):
        cfg = configparser.ConfigParser()
        cfg.read(os.path.join(util.REPO, "setup.cfg"))
        self.assertEqual(cfg["options"]["packages"], "find_namespace:")
        include = cfg["options.packages.find"]["include"].split()
        listed = set(find_namespace_packages(util.REPO, include=include))
        found = set()
        for root, dirs, files in os.walk(os.path.join(util.REPO,
                                                      "corednstw")):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            if "__init__.py" in files:
                rel = os.path.relpath(root, util.REPO)
                found.add(rel.replace(os.sep, "."))
        self.assertEqual(found - listed, set())
        self.assertIn("twisted.plugins", listed)
        self.assertNotIn("tests", listed)
