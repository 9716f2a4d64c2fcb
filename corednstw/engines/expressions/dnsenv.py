"""The functions CoreDNS gives every view and template expression
(plugin/pkg/expression's DefaultEnv): the request's fields as calls, plus
``incidr`` and ``metadata``.  Each reads ``scope.req``, a core Request."""

from corednstw.core import dnswire as w
from corednstw.engines.expressions.exprlang import (
    BOOL,
    INT,
    STRING,
    Function,
    _incidr,
    _metadata,
)


def _name(s):
    return s.req.qname


def _type(s):
    return w.type_text(s.req.qtype)


def _class(s):
    return w.class_text(s.req.qclass)


def _proto(s):
    return s.req.proto


def _size(s):
    return len(s.req.data)


def _client_ip(s):
    return s.req.client


def _port(s):
    return str(s.req.port)


def _id(s):
    return s.req.id


def _opcode(s):
    return s.req.opcode


def _do(s):
    return s.req.do


def _bufsize(s):
    return s.req.size


def _server_ip(s):
    local = s.req.local
    if not local or not local[0]:
        return "::" if s.req.family == 2 else "0.0.0.0"
    return local[0]


def _server_port(s):
    local = s.req.local
    return str(local[1]) if local else "0"


_TABLE = (
    ("incidr", (STRING, STRING), BOOL, _incidr),
    ("metadata", (STRING,), STRING, _metadata),
    ("type", (), STRING, _type),
    ("name", (), STRING, _name),
    ("class", (), STRING, _class),
    ("proto", (), STRING, _proto),
    ("size", (), INT, _size),
    ("client_ip", (), STRING, _client_ip),
    ("port", (), STRING, _port),
    ("id", (), INT, _id),
    ("opcode", (), INT, _opcode),
    ("do", (), BOOL, _do),
    ("bufsize", (), INT, _bufsize),
    ("server_ip", (), STRING, _server_ip),
    ("server_port", (), STRING, _server_port),
)


def default_env():
    """A fresh environment (name -> Function) callers may extend."""
    return {name: Function(name, params, result, impl)
            for name, params, result, impl in _TABLE}
