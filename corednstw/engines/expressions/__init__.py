"""The expression engines of the view and template plugins.

Two small languages, each compiled once at setup to Python closures:

* ``exprlang``: a subset of the expr language (expr-lang.org) that view
  and template filter and compute with; ``dnsenv.default_env()`` holds the
  functions CoreDNS provides (``name()``, ``client_ip()``, ``incidr``...);
* ``gotemplate``: a subset of Go's text/template that template writes its
  records with.

Compile errors are ``ExpressionError`` (callers turn them into Corefile
errors); failures while running for a query are ``EvalError``.
See docs/expressions.md for the supported subsets.
"""

import importlib
from typing import TYPE_CHECKING, Any

# The names load on first use: the plugins that only need ``goregexp``
# (errors, rewrite, auto) import this package without the expression
# language's compiler.
if TYPE_CHECKING:
    from corednstw.engines.expressions.dnsenv import default_env
    from corednstw.engines.expressions.exprlang import (
                                                        ANY,
                                                        BOOL,
                                                        EXPR_BUILTINS,
                                                        FLOAT,
                                                        INT,
                                                        KEYWORDS,
                                                        STRING,
                                                        Function,
                                                        Program,
                                                        Scope,
                                                        Variable,
    )
    from corednstw.engines.expressions.exprlang import compile as compile_expr
    from corednstw.engines.expressions.values import (
                                                        NO_VALUE,
                                                        EvalError,
                                                        ExpressionError,
                                                        go_text,
    )

_WHERE = {
    "ANY": "exprlang", "BOOL": "exprlang", "EXPR_BUILTINS": "exprlang",
    "FLOAT": "exprlang", "INT": "exprlang", "KEYWORDS": "exprlang",
    "STRING": "exprlang", "Function": "exprlang", "Program": "exprlang",
    "Scope": "exprlang", "Variable": "exprlang", "default_env": "dnsenv",
    "NO_VALUE": "values", "EvalError": "values",
    "ExpressionError": "values", "go_text": "values",
}


def __getattr__(name: str) -> Any:
    if name == "compile_expr":
        where, attr = "exprlang", "compile"
    elif name in _WHERE:
        where, attr = _WHERE[name], name
    else:
        raise AttributeError(
            "module %r has no attribute %r" % (__name__, name))
    value = getattr(importlib.import_module(
        "corednstw.engines.expressions." + where), attr)
    globals()[name] = value
    return value


__all__ = [
    "ANY", "BOOL", "EXPR_BUILTINS", "FLOAT", "INT", "KEYWORDS", "NO_VALUE",
    "STRING", "EvalError", "ExpressionError", "Function", "Program",
    "Scope", "Variable", "compile_expr", "default_env", "go_text",
]
