"""The ``--dump`` printer: parsed server blocks as stable text.

The format is described in ``core/corefile.py``'s docstring (one item per
line, two-space indentation, ``@ file:line`` for where each line was
written).  It lives apart from the grammar because it needs the directive
registry (which plugin provides a directive, the chain order) and the
grammar must not.
"""

import hashlib
import json
import os
import re

from corednstw.core import directives as _directives

_NEEDS_QUOTES = re.compile(r'[\s"#{}]|\A\Z')


def _quote(arg):
    if not _NEEDS_QUOTES.search(arg):
        return arg
    return '"%s"' % arg.replace('"', '\\"')


def _supported(name):
    try:
        return _directives.supported(name)
    except Exception as e:   # a plugin module that fails to import
        return "import failed: %s" % type(e).__name__


def _package(name):
    """`` [package version]`` for a directive a package other than
    corednstw provides (where a package's plugin sits in the chain)."""
    reg = _directives.provider(name)
    if reg is None or reg.builtin():
        return ""
    return " [%s %s]" % (reg.package, reg.version)


def dump(blocks):
    """Stable text form of parsed blocks (format in the module docstring)."""
    def where(path, line):
        if base:
            full = os.path.abspath(path)
            if full.startswith(base + os.sep):
                path = os.path.relpath(full, base)
        return "%s:%d" % (path, line)

    def lines(d, indent, top):
        text = " ".join([d.name] + [_quote(a) for a in d.args])
        text += " { @ " if d.children else " @ "
        text += where(d.file, d.line)
        if top:
            ok = _supported(d.name)
            if ok is not True:
                text += " [not supported yet%s]" % (": " + ok if ok else "")
            else:
                text += _package(d.name)
        out.append(indent + text)
        for c in d.children:
            lines(c, indent + "  ", False)
        if d.children:
            out.append(indent + "}")

    root = next((b.root for b in blocks if b.root), "")
    base = os.path.dirname(os.path.abspath(root)) if root else ""
    listeners = {}
    for n, block in enumerate(blocks, 1):
        for za in block.keys:
            nums = listeners.setdefault((za.transport, za.port), [])
            if n not in nums:
                nums.append(n)
    ordering = _directives.ordering(blocks, [])
    out = []
    if blocks and blocks[0].options:
        out.append("options")
        for d in blocks[0].options:
            lines(d, "  ", False)
    out.append("listeners")
    for (transport, port), nums in listeners.items():
        out.append("  %s :%s <- block%s %s" % (
            transport, port, "s" if len(nums) > 1 else "",
            " ".join(map(str, nums))))
    for n, block in enumerate(blocks, 1):
        out.append("block %d %s" % (n, where(block.file, block.line)))
        for za in block.keys:
            out.append("  key %s <- %s" % (za, za.key))
        out.append("  chain")
        order = sorted(block.directives,
                       key=lambda d: ordering.position(d.name))
        for d in order:
            lines(d, "    ", True)
    return "\n".join(out) + "\n"


def digest(blocks):
    """SHA512 (hex) of the parsed Corefile: keys and directive tokens, with
    imports expanded; comments, layout and line numbers do not count (as
    CoreDNS hashes caddy's JSON of the server blocks)."""
    def tree(d):
        return [d.name, list(d.args), [tree(c) for c in d.children]]
    doc = [[[k.key for k in b.keys], [tree(d) for d in b.directives]]
           for b in blocks]
    # Keys of one source key expand to several ZoneAddrs; dedupe in order.
    for entry in doc:
        entry[0] = list(dict.fromkeys(entry[0]))
    if blocks and blocks[0].options:
        # corednstw's global options: a new order is a change too.
        doc.append(["{}", [tree(d) for d in blocks[0].options]])
    return hashlib.sha512(json.dumps(doc).encode()).hexdigest()
