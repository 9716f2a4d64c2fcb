"""Reading a kubeconfig file without importing yaml, when it is plain.

PyYAML's import is 15-25 ms of CPU at every start with ``kubeconfig``;
the files kubectl, kubeadm and the clouds write are a small, regular
part of YAML: block mappings and sequences, plain and quoted scalars,
comments, and ``{}`` or ``[]`` for an empty value.  ``load`` reads
that part and returns what ``yaml.safe_load`` returns for it; for
anything else (flow collections, anchors, tags, block scalars, escapes,
several documents, a scalar that YAML might read as a number, a date
or null...) it hands the text to yaml, so the result, and any error, is
yaml's own.
"""

import re

#: Plain scalars read here as strings: what YAML 1.1's resolver reads
#: as a string for sure (not a number, bool, null, date or merge key).
_STRING = re.compile(r"[A-Za-z/][A-Za-z0-9._/:@+=%-]*(?<!:)\Z")
#: Digits first: a string when no int pattern of YAML 1.1 matches (its
#: floats, dates and base-60 numbers need ``.``, ``-`` or ``:``), e.g. a
#: hexadecimal token or base64 data.
_DIGITS_FIRST = re.compile(r"[0-9][0-9A-Za-z+/=]*\Z")
_INT = re.compile(r"[0-9_]*\Z|0[xXbB]")
_BOOLS = {"true": True, "True": True, "TRUE": True, "false": False,
          "False": False, "FALSE": False}
#: Words YAML 1.1 reads as bools or nulls (PyYAML's resolver).
_NOT_STRINGS = {"yes", "Yes", "YES", "no", "No", "NO", "on", "On", "ON",
                "off", "Off", "OFF", "null", "Null", "NULL"}
_KEY = re.compile(r"([A-Za-z][A-Za-z0-9._-]*):(?: +|\Z)")


class _Unplain(Exception):
    """Outside the part read here: yaml reads it."""


def load(data):
    """The kubeconfig document of ``data`` (bytes) as yaml.safe_load
    gives it; yaml.YAMLError when yaml cannot read it."""
    try:
        return _Reader(data.decode("utf-8")).document()
    except (_Unplain, UnicodeDecodeError):
        pass
    import yaml
    return yaml.safe_load(data)


def yaml_error():
    """yaml.YAMLError (importing yaml), for an ``except`` clause."""
    import yaml
    return yaml.YAMLError


def _scalar(text):
    """The value of a scalar written after ``key: `` or ``- ``."""
    if text[0] == '"':
        if len(text) < 2 or text[-1] != '"' or "\\" in text or \
                '"' in text[1:-1]:
            raise _Unplain()
        return text[1:-1]
    if text[0] == "'":
        inner = text[1:-1]
        if len(text) < 2 or text[-1] != "'" or \
                "'" in inner.replace("''", ""):
            raise _Unplain()
        return inner.replace("''", "'")
    if text == "{}":
        return {}
    if text == "[]":
        return []
    if text in _BOOLS:
        return _BOOLS[text]
    if _STRING.match(text) and text not in _NOT_STRINGS:
        return text
    if _DIGITS_FIRST.match(text) and not _INT.match(text):
        return text
    raise _Unplain()


class _Reader:

    def __init__(self, text):
        self.lines = []         # (indent, content)
        for raw in text.split("\n"):
            line = raw.rstrip("\r").rstrip(" ")
            stripped = line.lstrip(" ")
            if not stripped or stripped.startswith("#"):
                continue
            if "\t" in line or " #" in stripped or "\r" in line:
                raise _Unplain()
            if stripped.startswith(("---", "...", "%")):
                raise _Unplain()
            self.lines.append((len(line) - len(stripped), stripped))
        self.i = 0

    def document(self):
        if not self.lines:
            raise _Unplain()    # empty: yaml says None
        indent, _ = self.lines[0]
        if indent:
            raise _Unplain()
        value = self.node(0)
        if self.i != len(self.lines):
            raise _Unplain()
        return value

    def node(self, indent):
        """The block collection starting at line ``i``, at ``indent``."""
        if self.lines[self.i][1].startswith("- ") or \
                self.lines[self.i][1] == "-":
            return self.sequence(indent)
        return self.mapping(indent)

    def mapping(self, indent):
        out = {}
        while self.i < len(self.lines):
            at, text = self.lines[self.i]
            if at < indent:
                break
            if at > indent or text.startswith("-"):
                raise _Unplain()
            m = _KEY.match(text)
            if m is None:
                raise _Unplain()
            key = m.group(1)
            if key in out or key in _BOOLS or key in _NOT_STRINGS:
                raise _Unplain()
            rest = text[m.end():]
            self.i += 1
            if rest:
                out[key] = _scalar(rest)
            else:
                out[key] = self.child(indent)
        return out

    def child(self, indent):
        """The value of ``key:`` with nothing after it: the block below
        (a sequence may sit at the key's own indent), or null."""
        if self.i < len(self.lines):
            at, text = self.lines[self.i]
            if at > indent:
                return self.node(at)
            if at == indent and (text.startswith("- ") or text == "-"):
                return self.sequence(indent)
        raise _Unplain()        # null: yaml reads it

    def sequence(self, indent):
        out = []
        while self.i < len(self.lines):
            at, text = self.lines[self.i]
            if at != indent or not (text.startswith("- ") or text == "-"):
                if at > indent:
                    raise _Unplain()
                break
            body = text[2:].lstrip(" ")
            if not body:
                raise _Unplain()
            inner = indent + (len(text) - len(body))
            if body.startswith("-") or _KEY.match(body) is None:
                out.append(_scalar(body))
                self.i += 1
                continue
            # ``- key: value``: a mapping whose first line shares the
            # item's; its other keys sit at the first key's indent.
            self.lines[self.i] = (inner, body)
            out.append(self.mapping(inner))
        return out
