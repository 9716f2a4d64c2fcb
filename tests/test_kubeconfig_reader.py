"""The kubeconfig reader (engines/kubernetes/kubeconfig.py): the same
document as yaml.safe_load for every input, read without yaml for the
files kubectl and kubeadm write, yaml's reading (and errors) for the
rest."""

import random
import subprocess
import sys

import yaml
from twisted.trial import unittest

from corednstw.engines.kubernetes import kubeconfig

KUBEADM = b"""apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1J==
    server: https://10.0.0.1:6443
  name: kubernetes
contexts:
- context:
    cluster: kubernetes
    namespace: kube-system
    user: kubernetes-admin
  name: kubernetes-admin@kubernetes
current-context: kubernetes-admin@kubernetes
kind: Config
preferences: {}
users:
- name: kubernetes-admin
  user:
    client-certificate-data: 9ZS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1J
    client-key-data: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQo=
"""

HANDWRITTEN = b"""# a test cluster
apiVersion: v1
kind: Config
clusters:
  - name: kapi
    cluster:
      server: "https://127.0.0.1:16443"
      certificate-authority: '/tmp/ca.crt'
      insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: 593e9c42ca7e2e9f6843df5bbaefda2d94eda17001b0a2af

    tokenFile: 'it''s/here'
contexts:
- name: kapi
  context: {cluster: kapi, user: admin}
current-context: kapi
"""

#: Inputs the reader leaves to yaml (each still read the same).
OTHERS = [
    b"", b"# nothing\n", b"a: 1\n", b"a: 0x1f\n", b"a: 012\n", b"a: 1.5\n",
    b"a: 2001-12-14\n", b"a: yes\n", b"a: off\n", b"a: null\n", b"a: ~\n",
    b"a:\n", b"a: &x b\nc: *x\n", b"a: !!str 1\n", b"a: |\n  text\n",
    b"a: \"esc\\taped\"\n", b"---\na: b\n", b"a: b # comment\n",
    b"a: [b, c]\n", b"a: {b: c}\n", b"a:\tb\n", b"- a\n- b\n",
    b"a: b\na: c\n", b"1: b\n", b"a: 1_000\n", b"a: 593\n", b"a: 5e3\n",
    b"a: b:\n", b"a:\n  - b\n  -   c: d\n      e: f\n", b"a: 'b\n  c'\n",
    b"a: .inf\n", b"a: =\n", b"a: <<\n", b"a: '\n", b"a: [\n",
    b"a: b\n  c: d\n", b"  a: b\n", b"a:\n- - b\n", b"a: -b\n",
    b"a: @b\n", b"\xff: b\n", b"a : b\n", b"a:b\n", b"a: b c\n",
    b"- a: b\n  - c\n", b"- a: b\n   c: d\n", b"a:\n  b: c\n d: e\n",
    b"a: -\n", b"-\n", b"- \n", b"a: b\n...\n", b"%YAML 1.1\n---\na: b\n",
    b"a: 'b''\n", b"a: \"b\"c\"\n", b"a: True\nb: FALSE\n",
]


def _same(testcase, data):
    try:
        want = ("ok", yaml.safe_load(data))
    except yaml.YAMLError as e:
        want = ("error", str(e))
    try:
        got = ("ok", kubeconfig.load(data))
    except yaml.YAMLError as e:
        got = ("error", str(e))
    testcase.assertEqual(got, want, data)


class ReaderTest(unittest.TestCase):

    def test_plain_files_without_yaml(self):
        for data in (KUBEADM, HANDWRITTEN.replace(
                b"  context: {cluster: kapi, user: admin}",
                b"  context:\n    cluster: kapi\n    user: admin")):
            got = kubeconfig._Reader(data.decode()).document()
            self.assertEqual(got, yaml.safe_load(data))

    def test_same_as_yaml(self):
        for data in [KUBEADM, HANDWRITTEN] + OTHERS:
            _same(self, data)
            _same(self, data.replace(b"\n", b"\r\n"))

    def test_same_as_yaml_mutated(self):
        """Lines of the sample files with characters dropped, doubled or
        changed: whatever the reader makes of them, yaml makes the same."""
        rnd = random.Random(7)
        chars = b" :-#'\"{}[]\n\tx0.&*!|>"
        for _ in range(600):
            data = bytearray(rnd.choice((KUBEADM, HANDWRITTEN)))
            for _ in range(rnd.randint(1, 3)):
                i = rnd.randrange(len(data))
                op = rnd.randrange(3)
                if op == 0:
                    del data[i]
                elif op == 1:
                    data[i:i] = data[i:i + 1]
                else:
                    data[i] = rnd.choice(chars)
            _same(self, bytes(data))

    def test_no_yaml_imported(self):
        path = self.mktemp()
        with open(path, "wb") as f:
            f.write(KUBEADM.replace(b"https:", b"http:").replace(
                b"client-certificate-data", b"token"))
        out = subprocess.run(
            [sys.executable, "-c",
             "import sys\n"
             "from corednstw.engines.kubernetes import client\n"
             "c = client.from_kubeconfig(sys.argv[1])\n"
             "print(c.host, 'yaml' in sys.modules)\n", path],
            capture_output=True, text=True, timeout=60)
        self.assertEqual(out.stdout, "http://10.0.0.1:6443 False\n",
                         out.stderr)
