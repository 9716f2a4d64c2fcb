"""The first lists asked for while the server is still being built.

At 10,000 Services the API server takes 0.1-0.3 s to write the
services list as JSON, and the lists begin only once the configuration
is built (``Plugin.prestart``), after the reactor, the app and the
plugins are imported.  ``prefetch`` takes the Corefile's kubernetes
directives, parsed before anything else (service/entry.py), and asks
for their services and endpointslices lists at once
(``watch.prefetch``), so the API server's work overlaps the rest of the
start.  The options are read here only as far as they shape
those requests; the watchers take an answer only when they ask for
exactly that request (same connection options, path and query), so a
Corefile read otherwise here costs at most a list nobody takes.
Anything unexpected (an unreadable Corefile, a grammar error, a
kubeconfig the direct client cannot use) means no prefetch: the
configuration's build reports it as before.
"""

from typing import Any

from corednstw.engines.kubernetes import watch as wt
from corednstw.plugins.kubernetes import store as st
from corednstw.plugins.kubernetes.plugin import USER_AGENT

#: Options that change the lists' requests or their connection, beyond
#: those read here (the connection's rate limits): no prefetch.
UNSUPPORTED = ("apiserver_qps", "apiserver_burst", "apiserver_max_inflight")


def prefetch(directives):
    """Ask for the first lists of these kubernetes directives (parsed,
    not set up); never raises."""
    for d in directives:
        try:
            got = requests(d)
        except Exception:
            continue
        if got is not None:
            opts, pages = got
            wt.prefetch(opts, pages, USER_AGENT)


def requests(d):
    """(connection options, [(path, query)]) of one kubernetes
    directive's first lists, as its watchers will ask for them; None
    when not known here."""
    opts = {}
    labels = None
    kinds = [st.SERVICES, st.SLICES]
    for c in d.children:
        args = c.args
        if c.name in UNSUPPORTED:
            return None
        if c.name == "endpoint":
            if not args:
                return None
            opts["endpoint"] = args[0]
        elif c.name == "tls":
            if len(args) != 3:
                return None
            opts["tls"] = tuple(args)
        elif c.name == "kubeconfig":
            if not 1 <= len(args) <= 2:
                return None
            opts["kubeconfig"] = args[0]
            opts["context"] = args[1] if len(args) == 2 else None
        elif c.name == "labels":
            labels = " ".join(args)
        elif c.name == "noendpoints" and st.SLICES in kinds:
            kinds.remove(st.SLICES)
    endpoint = opts.get("endpoint")
    if endpoint and "://" not in endpoint:
        opts["endpoint"] = ("https://" if opts.get("tls")
                            else "http://") + endpoint
    pages = []
    for kind in kinds:
        query: list[tuple[str, Any]] = (
            [("labelSelector", labels)] if labels else [])
        query += [("limit", wt.PAGE), ("resourceVersion", "0")]
        pages.append((st.RESOURCES[kind][0], query))
    return opts, pages
