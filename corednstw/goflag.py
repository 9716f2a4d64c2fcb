"""Go's ``flag`` package, as CoreDNS's and node-cache's command lines use it.

Manifests written for those binaries pass arguments Go's rules accept:
``-conf FILE``, ``-conf=FILE``, ``--conf FILE``; booleans as ``-quiet`` or
``-quiet=false`` (never ``-quiet false``: the ``false`` would end the
flags); ``--`` ends the flags, and so does the first argument that is not
one.  Errors, usage text and exit statuses are Go's (``flag.ExitOnError``):
the error line and the usage on standard error, exit 2; ``-h`` and
``-help`` print the usage and exit 0.
"""

import dataclasses
import sys

from corednstw.core import durations, goparse


class FlagError(Exception):
    """A command line Go's flag package refuses (its error text)."""


class HelpRequested(Exception):
    """``-h`` or ``-help`` where no such flag is defined."""


@dataclasses.dataclass
class Flag:
    name: str
    kind: str          # "string", "bool" or "duration"
    default: object
    usage: str
    dest: str

    def set(self, value):
        """The typed value of ``value``; FlagError with Go's words."""
        if self.kind == "string":
            return value
        if self.kind == "bool":
            try:
                return goparse.parse_bool(value)
            except ValueError:
                raise FlagError("invalid boolean value %s for -%s: parse "
                                "error" % (_quote(value), self.name)) from None
        try:
            return durations.parse_duration(value, strict=True)
        except ValueError:
            raise FlagError("invalid value %s for flag -%s: parse error"
                            % (_quote(value), self.name)) from None

    def default_text(self):
        """The `` (default ...)`` suffix PrintDefaults adds, or ""."""
        if self.kind == "string":
            return " (default %s)" % _quote(self.default) \
                if self.default else ""
        if self.kind == "bool":
            return " (default true)" if self.default else ""
        if not self.default:
            return ""
        return " (default %s)" % durations.format_duration(self.default)


def _quote(text):
    """Go's %q for the plain text a command line holds."""
    out = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"%s"' % out.replace("\n", "\\n").replace("\t", "\\t")


class FlagSet:
    """Flags by name; several names may share one ``dest`` (CoreDNS's
    ``-p`` and ``-dns.port``): the last one given wins."""

    def __init__(self, prog, header=None):
        self.prog = prog
        #: Lines printed between "Usage of PROG:" and the flags.
        self.header = header or []
        self.flags = {}

    def _add(self, kind, name, default, usage, dest):
        self.flags[name] = Flag(name, kind, default, usage, dest or name)

    def string(self, name, default, usage, dest=None):
        self._add("string", name, default, usage, dest)

    def bool(self, name, default, usage, dest=None):
        self._add("bool", name, default, usage, dest)

    def duration(self, name, default, usage, dest=None):
        """``default`` and values in seconds."""
        self._add("duration", name, default, usage, dest)

    def defaults(self):
        values = {}
        for f in self.flags.values():
            values.setdefault(f.dest, f.default)
        return values

    def parse(self, args):
        """(values by dest, the arguments after the flags)."""
        values = self.defaults()
        args = list(args)
        while args:
            s = args[0]
            if len(s) < 2 or s[0] != "-":
                break
            minuses = 2 if s[1] == "-" else 1
            if s == "--":
                args.pop(0)
                break
            name = s[minuses:]
            if not name or name[0] in "-=":
                raise FlagError("bad flag syntax: %s" % s)
            args.pop(0)
            value = None
            if "=" in name[1:]:
                name, value = name.split("=", 1)
            flag = self.flags.get(name)
            if flag is None:
                if name in ("help", "h"):
                    raise HelpRequested()
                raise FlagError("flag provided but not defined: -%s" % name)
            if flag.kind == "bool":
                values[flag.dest] = flag.set("true" if value is None
                                             else value)
                continue
            if value is None:
                if not args:
                    raise FlagError("flag needs an argument: -%s" % name)
                value = args.pop(0)
            values[flag.dest] = flag.set(value)
        return values, args

    def usage(self):
        """Go's default usage: the header, then PrintDefaults."""
        lines = ["Usage of %s:" % self.prog] + list(self.header)
        for name in sorted(self.flags):
            f = self.flags[name]
            line = "  -" + name
            kind = "" if f.kind == "bool" else " " + f.kind
            line += kind
            text = f.usage.replace("\n", "\n    \t") + f.default_text()
            # Go puts a one-letter flag's text on the same line.
            if len(line) <= 4:
                lines.append(line + "\t" + text)
            else:
                lines.append(line + "\n    \t" + text)
        return "\n".join(lines) + "\n"

    def parse_or_exit(self, args, stderr=None):
        """``flag.Parse`` with ExitOnError: usage and exit 2 on an error,
        usage and exit 0 on -h/-help."""
        err = stderr or sys.stderr
        try:
            return self.parse(args)
        except HelpRequested:
            err.write(self.usage())
            err.flush()
            sys.exit(0)
        except FlagError as e:
            err.write(str(e) + "\n" + self.usage())
            err.flush()
            sys.exit(2)
