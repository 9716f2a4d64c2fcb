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

__all__ = [
    "ANY", "BOOL", "EXPR_BUILTINS", "FLOAT", "INT", "KEYWORDS", "NO_VALUE",
    "STRING", "EvalError", "ExpressionError", "Function", "Program",
    "Scope", "Variable", "compile_expr", "default_env", "go_text",
]
