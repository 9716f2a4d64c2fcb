"""deploy/helm/corednstw without Helm: the values schema against the
default and CI values files, and the templates' structure (each parses as
YAML once its actions are stubbed; every value a template reads is
declared in values.yaml).  Rendering with Helm itself and the API-server
dry-run are described in docs/deploy.md."""

import copy
import glob
import json
import os
import re

import jsonschema
import yaml
from twisted.trial import unittest

import corednstw
from tests.support.util import REPO

CHART = os.path.join(REPO, "deploy", "helm", "corednstw")
TEMPLATES = os.path.join(CHART, "templates")

_ACTION = re.compile(r"\{\{.*?\}\}", re.S)
_COMMENT = re.compile(r"\{\{-?\s*/\*.*?\*/\s*-?\}\}", re.S)
#: .Values.a.b (or $.Values.a.b) read by a template.
_VALUES_REF = re.compile(r"\$?\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")
#: {{ $x := .Values.a.b }}, an alias later read as $x.c (not a range
#: variable, which holds the items).
_ALIAS = re.compile(r"\{\{-?\s*\$([A-Za-z_]\w*)\s*:=\s*\$?\.Values"
                    r"((?:\.[A-Za-z_][A-Za-z0-9_]*)+)\s*-?\}\}")


def _load(path):
    with open(path) as f:
        return yaml.safe_load(f)


def _merge(base, over):
    """Helm's merge of a values file over the chart's values: maps merge
    key by key, everything else is replaced."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _validator():
    with open(os.path.join(CHART, "values.schema.json")) as f:
        schema = json.load(f)
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def _templates():
    return sorted(glob.glob(os.path.join(TEMPLATES, "*.yaml")))


def _stub(text):
    """The template with its actions replaced: a line holding nothing but
    actions goes, an action inside a line becomes the scalar 'stub'."""
    text = _COMMENT.sub("", text)
    out = []
    for line in text.splitlines():
        if line.strip() and not _ACTION.sub("", line).strip():
            continue
        out.append(_ACTION.sub("stub", line))
    return "\n".join(out)


class ChartTest(unittest.TestCase):

    def test_chart_metadata(self):
        chart = _load(os.path.join(CHART, "Chart.yaml"))
        self.assertEqual(chart["apiVersion"], "v2")
        self.assertEqual(chart["name"], "corednstw")
        self.assertEqual(chart["appVersion"], corednstw.__version__)


class SchemaTest(unittest.TestCase):

    def setUp(self):
        self.validator = _validator()
        self.values = _load(os.path.join(CHART, "values.yaml"))

    def test_default_values_are_valid(self):
        self.validator.validate(self.values)

    def test_ci_values_are_valid(self):
        files = sorted(glob.glob(os.path.join(CHART, "ci", "*.yaml")))
        self.assertIn(os.path.join(CHART, "ci", "all-features-values.yaml"),
                      files)
        for path in files:
            self.validator.validate(_merge(self.values, _load(path)))

    def test_every_default_is_declared(self):
        """Each key of values.yaml has a schema entry (so a typo in a
        user's file under a known key is caught)."""
        def walk(values, schema, path):
            props = schema.get("properties")
            if not isinstance(values, dict) or props is None:
                return
            for k, v in values.items():
                self.assertIn(k, props, ".".join(path + [k]))
                walk(v, props[k], path + [k])
        walk(self.values, self.validator.schema, [])

    def _invalid(self, change):
        v = copy.deepcopy(self.values)
        change(v)
        errors = list(self.validator.iter_errors(v))
        self.assertTrue(errors, "accepted")
        return errors

    def test_rejects_a_plugin_without_name(self):
        self._invalid(lambda v: v["servers"][0]["plugins"].append(
            {"parameters": "."}))

    def test_rejects_wrong_types(self):
        self._invalid(lambda v: v.update(replicaCount="two"))
        self._invalid(lambda v: v.update(serviceType="Ingress"))
        self._invalid(lambda v: v["servers"][0]["zones"][0].update(
            scheme="dns"))
        self._invalid(lambda v: v["deployment"].update(dnsPolicy="none"))
        self._invalid(lambda v: v["autoscaler"].update(coresPerReplica=0))

    def test_rejects_a_misspelt_nested_key(self):
        self._invalid(lambda v: v["prometheus"]["monitor"].update(
            enable=True))

    def test_unknown_top_level_keys_pass(self):
        """A values file may carry keys of its own at the top (anchors,
        settings for other tools); only the chart's keys are typed."""
        v = dict(self.values, notes={"owner": "dns"})
        self.validator.validate(v)


class TemplateTest(unittest.TestCase):

    def test_each_template_is_one_yaml_document(self):
        names = [os.path.basename(p) for p in _templates()]
        self.assertEqual(len(names), 15)
        for path in _templates():
            with open(path) as f:
                docs = [d for d in yaml.safe_load_all(_stub(f.read()))
                        if d is not None]
            self.assertEqual(len(docs), 1, path)
            doc = docs[0]
            for key in ("apiVersion", "kind", "metadata"):
                self.assertIn(key, doc, path)
            self.assertIn("name", doc["metadata"], path)

    def test_stub_keeps_structure(self):
        """The stubbing itself: actions alone on a line vanish, actions in
        a line become a scalar."""
        text = ("{{- if .Values.x }}\nkind: {{ .Values.k }}\nmetadata:\n"
                "  labels:\n    {{- include \"l\" . | nindent 4 }}\n"
                "  name: a-{{ .Release.Name }}\n{{- end }}\n")
        self.assertEqual(yaml.safe_load(_stub(text)),
                         {"kind": "stub", "metadata": {
                             "labels": None, "name": "a-stub"}})

    def test_every_value_read_is_declared(self):
        values = _load(os.path.join(CHART, "values.yaml"))
        missing = []
        files = _templates() + [os.path.join(TEMPLATES, "_helpers.tpl"),
                                os.path.join(TEMPLATES, "NOTES.txt")]
        seen = 0
        for path in files:
            with open(path) as f:
                text = f.read()
            refs = [m.group(1)[1:] for m in _VALUES_REF.finditer(text)]
            for var, base in _ALIAS.findall(text):
                for m in re.finditer(r"\$%s((?:\.[A-Za-z_]\w*)+)" % var,
                                     text):
                    refs.append(base[1:] + m.group(1))
            for ref in refs:
                seen += 1
                node = values
                for part in ref.split("."):
                    if node == {}:
                        break   # a free-form object, e.g. a PDB's spec
                    if not isinstance(node, dict) or part not in node:
                        missing.append("%s: .Values.%s"
                                       % (os.path.basename(path), ref))
                        break
                    node = node[part]
        self.assertGreater(seen, 100)
        self.assertEqual(missing, [])

    def test_container_runs_coredns_flags(self):
        with open(os.path.join(TEMPLATES, "deployment.yaml")) as f:
            dep = yaml.safe_load(_stub(f.read()))
        c = dep["spec"]["template"]["spec"]["containers"][0]
        self.assertEqual(c["args"], ["-conf", "/etc/coredns/Corefile"])
        self.assertEqual(c["volumeMounts"][0]["mountPath"], "/etc/coredns")
