"""One line of a Corefile, and the typed readers plugins parse it with.

Every plugin's setup reads its arguments and options through these
readers rather than by hand, so that a count, a number, a duration, a
boolean or an address is checked one way everywhere, and refused with the
words CoreDNS uses (passed in where a plugin words it its own way).  A
reader returns the value or raises the line's CorefileError.

The shape of a typical setup::

    def setup(d, block):
        zones = zones_from_args(d.between(0, 1), block)
        opts = Options()
        d.read_options({
            "ttl": lambda c: setattr(opts, "ttl", c.integer(c.one(),
                                                             lo=0)),
            "timeout": lambda c: setattr(opts, "timeout",
                                         c.duration(c.one())),
        })
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from corednstw.core import goparse
from corednstw.core.durations import parse_duration
from corednstw.core.errors import CorefileError

#: CoreDNS's most common words for an option it does not know.
UNKNOWN_PROPERTY = "unknown property '%s'"

#: CoreDNS's wrong-argument-count words after the token ``{text}``; also
#: a reader's wording where a plugin answers a bad value with them.
ARG_COUNT = "Wrong argument count or unexpected line ending after '{text}'"


def _word(fmt, text, reason):
    """A plugin's wording of a refused value.  ``{text}`` (the value as
    written; ``{text!r}`` for Python's quoting of it) and ``{reason}``
    (Go's error text) are filled in; a format without them but with
    ``%s`` gets Go's text there; a plain message is used as it is."""
    if "{" in fmt:
        return fmt.format(text=text, reason=reason)
    if "%" in fmt:
        return fmt % reason
    return fmt


@dataclass(eq=False)
class Directive:
    """One line of a server block (or of a directive's block).

    ``plugin`` is the top-level directive this line belongs to, so errors
    raised from a child line still name the plugin.
    """
    name: str
    args: list
    children: list
    file: str
    line: int
    plugin: str = ""
    notices: list = field(default_factory=list, repr=False, compare=False)

    def __post_init__(self):
        self.plugin = self.plugin or self.name

    # -- errors and notices ---------------------------------------------

    def error(self, msg):
        """An error at this line, prefixed like CoreDNS's plugin errors."""
        return CorefileError(self.file, self.line,
                             "plugin/%s: %s" % (self.plugin, msg), self.plugin)

    def deprecated(self, msg):
        """Accept old syntax CoreDNS has since removed, with a notice.

        ``msg`` says what changed and names today's equivalent.  The
        notice is logged once when the configuration is built (at start,
        on reload and by ``--check``, which is how users find what to
        modernise), as ``[WARNING] plugin/NAME: msg (file:line)``.
        """
        self.notices.append(msg)

    def arg_error(self, after=None):
        """CoreDNS's wrong-argument-count error, after the last token read
        (by default the last token of this line)."""
        if after is None:
            after = self.args[-1] if self.args else self.name
        return self.error(ARG_COUNT.format(text=after))

    # -- argument counts ------------------------------------------------

    def no_args(self, error=None):
        """Refuse any argument: CoreDNS's ``if c.NextArg() { return
        c.ArgErr() }`` (or ``error``, its own words)."""
        if self.args:
            raise self.error(error) if error else self.arg_error()

    def exactly(self, n, error=None):
        """The arguments, which must be exactly ``n``."""
        if len(self.args) != n:
            raise self.error(error) if error else self.arg_error()
        return list(self.args)

    def between(self, lo, hi=None, error=None):
        """The arguments, at least ``lo`` and (unless ``hi`` is None) at
        most ``hi`` of them."""
        n = len(self.args)
        if n < lo or (hi is not None and n > hi):
            raise self.error(error) if error else self.arg_error()
        return list(self.args)

    def one(self, error=None):
        """The single argument of an option line (``ttl 30``)."""
        return self.exactly(1, error)[0]

    def no_block(self, error=None):
        """Refuse a ``{ ... }`` block where the plugin takes none."""
        if self.children:
            c = self.children[0]
            raise c.error(error or UNKNOWN_PROPERTY % c.name)

    # -- values ---------------------------------------------------------

    def integer(self, text, lo=None, hi=None, error=None, func="Atoi",
                bits=64, range_error=None):
        """A decimal integer as Go reads it (``func``: Atoi, ParseInt or
        ParseUint, of ``bits`` bits).  ``error``: a format for the
        message, given Go's own text as ``%s`` (e.g. ``"invalid TTL: %s"``);
        ``lo``/``hi``: the bounds, refused with ``range_error`` (a format
        given the value) or Go's out-of-range text."""
        try:
            if func == "ParseUint":
                value = goparse.parse_uint(text, bits)
            elif func == "Atoi":
                value = goparse.atoi(text)
            else:
                value = goparse.parse_int(text, bits, func)
        except ValueError as e:
            raise self.error(_word(error, text, e) if error else str(e)) \
                from e
        if (lo is not None and value < lo) or (hi is not None
                                               and value > hi):
            if range_error is None:
                raise self.error(goparse.num_error(func, text,
                                                   "value out of range"))
            raise self.error(_word(range_error, text, value))
        return value

    def duration(self, text, strict=True, error=None, lo=None,
                 range_error=None):
        """Seconds from a Go duration (``5s``, ``1m30s``); ``strict``: Go's
        time.ParseDuration (a unit required but for ``0``), else a bare
        number counts as seconds.  ``error`` formats Go's text; ``lo``
        refuses shorter ones with ``range_error`` (given the text)."""
        try:
            value = parse_duration(text, strict=strict)
        except ValueError as e:
            raise self.error(_word(error, text, e) if error else str(e)) \
                from e
        if lo is not None and value < lo:
            raise self.error(_word(range_error or "invalid duration: %s",
                                   text, text))
        return value

    def boolean(self, text, error=None):
        """Go's strconv.ParseBool (``error`` formats its text)."""
        try:
            return goparse.parse_bool(text)
        except ValueError as e:
            raise self.error(_word(error, text, e) if error else str(e)) \
                from e

    def number(self, text, error=None):
        """A float as Go's strconv.ParseFloat(s, 64) reads it (``error``
        words a refusal, see ``integer``)."""
        try:
            return goparse.parse_float(text)
        except ValueError as e:
            raise self.error(_word(error, text, e) if error else str(e)) \
                from e

    def ip(self, text, error=None):
        """An address as Go's net.ParseIP reads it; ``error`` (a format
        given the text) when it is none."""
        ip = goparse.parse_ip(text)
        if ip is None:
            raise self.error(_word(error or "invalid IP address: %s", text,
                                   text))
        return ip

    def host_port(self, text, error=None):
        """(host, port) of ``host:port`` as Go's net.SplitHostPort splits
        it (a port required, not checked); ``error`` words a refusal (see
        ``integer``), else Go's text."""
        try:
            return goparse.split_host_port(text)
        except ValueError as e:
            raise self.error(_word(error, text, e) if error else str(e)) \
                from e

    def choice(self, text, choices, error=None):
        """``text`` when it is one of ``choices``; else ``error`` (given
        the text)."""
        if text not in choices:
            raise self.error(_word(error or "unknown value '%s'", text,
                                   text))
        return text

    # -- option blocks --------------------------------------------------

    def read_options(self, handlers: Mapping[str, Callable[[Any], Any]],
                     unknown: Optional[str] = UNKNOWN_PROPERTY,
                     fold_case: bool = False,
                     unknown_here: bool = False) -> None:
        """Hand each line of the block to ``handlers[line.name]`` in
        Corefile order.  A name without a handler is refused with
        ``unknown`` (a format given the name), at the option's line, or
        at this directive's line with ``unknown_here`` (as CoreDNS reports
        some); ``unknown=None`` hands it to ``handlers[None]`` instead.
        ``fold_case``: option names in any case (CoreDNS lower-cases
        them for a few plugins, and names an unknown one lower-cased)."""
        for c in self.children:
            name = c.name.lower() if fold_case else c.name
            handler = handlers.get(name)
            if handler is None:
                if unknown is None and None in handlers:
                    handlers[None](c)
                    continue
                at = self if unknown_here else c
                raise at.error((unknown or UNKNOWN_PROPERTY) % name)
            handler(c)
