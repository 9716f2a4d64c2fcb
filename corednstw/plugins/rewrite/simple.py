"""The ``type`` and ``class`` fields: swap one question type (or class)
for another; nothing to undo on the way back."""

from corednstw.core import dnswire as w
from corednstw.plugins.rewrite.rule import Rule

# The class mnemonics CoreDNS's DNS library knows.
_CLASSES = {"IN": 1, "CS": 2, "CH": 3, "HS": 4, "NONE": 254, "ANY": 255}


def _type(text):
    up = text.upper()
    if up.startswith("TYPE"):
        raise ValueError('invalid type "%s"' % up)
    try:
        return w.type_value(up)
    except ValueError as e:
        raise ValueError('invalid type "%s"' % up) from e


def _class(text):
    up = text.upper()
    try:
        return _CLASSES[up]
    except KeyError as e:
        raise ValueError('invalid class "%s"' % up) from e


class TypeRule(Rule):

    def __init__(self, mode, frm, to):
        super().__init__(mode)
        self.frm = frm
        self.to = to
        if not frm or not to:
            self.match = _never

    def match(self, q):
        return q.qtype == self.frm

    def apply(self, st, hit):
        st.qtype = self.to
        return []


class ClassRule(Rule):

    def __init__(self, mode, frm, to):
        super().__init__(mode)
        self.frm = frm
        self.to = to
        if not frm or not to:
            self.match = _never

    def match(self, q):
        return q.qclass == self.frm

    def apply(self, st, hit):
        st.qclass = self.to
        return []


def _never(q):
    return False


def new_type_rule(mode, args):
    return TypeRule(mode, _type(args[0]), _type(args[1]))


def new_class_rule(mode, args):
    return ClassRule(mode, _class(args[0]), _class(args[1]))
