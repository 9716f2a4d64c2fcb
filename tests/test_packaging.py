"""The installed package holds every plugin module (a wheel built from the
tree lists every corednstw package and the twistd plugin)."""

import configparser
import os

from twisted.trial import unittest

from tests.support import util


class PackagesTest(unittest.TestCase):

    def test_every_package_listed(self):
        cfg = configparser.ConfigParser()
        cfg.read(os.path.join(util.REPO, "setup.cfg"))
        listed = set(cfg["options"]["packages"].split())
        found = set()
        for root, dirs, files in os.walk(os.path.join(util.REPO,
                                                      "corednstw")):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            if "__init__.py" in files:
                rel = os.path.relpath(root, util.REPO)
                found.add(rel.replace(os.sep, "."))
        self.assertEqual(found - listed, set())
        self.assertIn("twisted.plugins", listed)
