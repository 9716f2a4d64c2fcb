"""rpz's Corefile stanza:

    rpz [ZONES...] {
        policy NAME FILE
        policy NAME axfr PRIMARY...
    }

NAME is the policy zone's origin (as Unbound's ``rpz: name:``); FILE its
zone file (relative to the *root* directory); ``axfr`` transfers it from
the PRIMARY servers instead (tried in order) and keeps it up to date.
The policies are consulted in the order of their lines.
"""

from corednstw.core import names
from corednstw.core.plugin import zones_from_args
from corednstw.engines.transfer import parse_peer
from corednstw_rpz.plugin import RPZ, Transfers
from corednstw_rpz.policy import PolicyError, Zone, load


def setup(d, block):
    zones = zones_from_args(d.args, block)
    policies = []
    primaries = {}
    seen = set()

    def policy(c):
        args = c.between(2) if len(c.args) > 2 else c.exactly(2)
        name = args[0]
        origin = names.normalize_name(name)
        if not names.is_domain_name(name):
            raise c.error("invalid policy zone name '%s'" % name)
        if origin in seen:
            raise c.error("policy '%s' is given twice" % origin)
        seen.add(origin)
        if args[1] == "axfr" and len(args) > 2:
            primaries[origin] = [_primary(c, a) for a in args[2:]]
            policies.append(Zone(origin))
            return
        if len(args) > 2:
            raise c.arg_error()
        try:
            zone = load(origin, block.path(args[1]))
        except PolicyError as e:
            raise c.error("policy %s: %s" % (origin, e)) from e
        policies.append(zone)

    d.read_options({"policy": policy})
    if not policies:
        raise d.error("no policy given")
    if not primaries:
        return RPZ(zones, policies)
    plugin = RPZ(zones, policies)
    transfers = Transfers(plugin.installed)
    for origin, peers in primaries.items():
        transfers.add(origin, peers)
    plugin.transfers = transfers
    return plugin


def _primary(c, text):
    try:
        return parse_peer(text)
    except ValueError as e:
        raise c.error("not an IP address: %s" % text) from e
