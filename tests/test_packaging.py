"""The installed package holds every plugin module (the find rules of
setup.cfg cover every corednstw package and the twistd plugin), and
``twistd`` finds the ``coredns`` plugin after ``pip install .`` and after a
plain ``pip install -e .``."""

import configparser
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import venv

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


#: Lists the twistd plugins an interpreter finds, as twistd does.
LIST_PLUGINS = ("from twisted.application.service import IServiceMaker\n"
                "from twisted.plugin import getPlugins\n"
                "print(' '.join(p.tapname for p in "
                "getPlugins(IServiceMaker)))\n")


class InstallTest(unittest.TestCase):
    """Real installs into a throwaway environment (no network: no
    dependencies, this environment's setuptools and Twisted), then the
    plugins Twisted discovers there, from an unrelated directory."""

    def setUp(self):
        try:
            import setuptools
            import wheel  # noqa: F401 (setuptools builds wheels with it)
        except ImportError as e:
            raise unittest.SkipTest("setuptools and wheel are needed (the "
                                    "test extras)") from e
        if int(setuptools.__version__.split(".")[0]) < 64:
            raise unittest.SkipTest("setuptools 64 or later is needed")
        self.tmp = tempfile.mkdtemp(prefix="corednstw-install-")
        self.addCleanup(util._rmtree, self.tmp)

    def source(self):
        """A copy of the project to install from: builds write their
        scratch files (build/, *.egg-info) there, not in the checkout."""
        src = os.path.join(self.tmp, "src")
        os.makedirs(src)
        for name in ("setup.cfg", "pyproject.toml", "README.md"):
            shutil.copy(os.path.join(util.REPO, name), src)
        skip = shutil.ignore_patterns("__pycache__", "dropin.cache")
        for name in ("corednstw", "twisted"):
            shutil.copytree(os.path.join(util.REPO, name),
                            os.path.join(src, name), ignore=skip)
        return src

    def pip(self, python, *args):
        r = subprocess.run(
            [sys.executable, "-m", "pip", "--python", python, "install",
             "-q", "--no-deps", "--no-build-isolation", "--no-index"]
            + list(args), capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def plugins(self, python, path=None):
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        if path:
            env["PYTHONPATH"] = path
        r = subprocess.run([python, "-c", LIST_PLUGINS], cwd=self.tmp,
                           env=env, capture_output=True, text=True,
                           timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout.split()

    def environment(self):
        """A new venv that borrows this one's packages (not its .pth
        files, so this checkout is not on its path)."""
        home = os.path.join(self.tmp, "env")
        venv.create(home, with_pip=False)
        python = os.path.join(home, "bin", "python")
        site = subprocess.run(
            [python, "-c", "import sysconfig; "
             "print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True).stdout.strip()
        with open(os.path.join(site, "borrowed.pth"), "w") as f:
            f.write(sysconfig.get_paths()["purelib"] + "\n")
        return python

    def test_editable_install(self):
        # The default editable mode, as a user types it.
        python = self.environment()
        self.assertNotIn("coredns", self.plugins(python))
        self.pip(python, "-e", self.source())
        self.assertIn("coredns", self.plugins(python))

    def test_install(self):
        target = os.path.join(self.tmp, "target")
        self.pip(sys.executable, "--target", target, self.source())
        self.assertTrue(os.path.exists(os.path.join(
            target, "twisted", "plugins", "coredns_plugin.py")))
        self.assertIn("coredns", self.plugins(sys.executable, target))
