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


class FieldRule(Rule):
    """``type FROM TO`` and ``class FROM TO``: one question field (``qtype``
    or ``qclass``) swapped when it equals FROM."""

    def __init__(self, mode, field, frm, to):
        super().__init__(mode)
        self.field = field
        self.frm = frm
        self.to = to
        self.match = self._same if frm and to else _never

    def _same(self, q):
        return getattr(q, self.field) == self.frm

    def apply(self, st, hit):
        setattr(st, self.field, self.to)
        return []


def _never(q):
    return False


def new_type_rule(mode, args):
    return FieldRule(mode, "qtype", _type(args[0]), _type(args[1]))


def new_class_rule(mode, args):
    return FieldRule(mode, "qclass", _class(args[0]),
                     _class(args[1]))
