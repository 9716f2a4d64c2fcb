"""rpz's Corefile stanza:

    rpz [ZONES...] {
        policy NAME FILE
    }

NAME is the policy zone's origin (as Unbound's ``rpz: name:``); FILE its
zone file (relative to the *root* directory).  The policies are consulted
in the order of their lines.
"""

from corednstw.core import names
from corednstw.core.plugin import zones_from_args
from corednstw_rpz.plugin import RPZ
from corednstw_rpz.policy import PolicyError, load


def setup(d, block):
    zones = zones_from_args(d.args, block)
    policies = []
    seen = set()

    def policy(c):
        name, path = c.exactly(2)
        origin = names.normalize_name(name)
        if not names.is_domain_name(name):
            raise c.error("invalid policy zone name '%s'" % name)
        if origin in seen:
            raise c.error("policy '%s' is given twice" % origin)
        seen.add(origin)
        try:
            zone = load(origin, block.path(path))
        except PolicyError as e:
            raise c.error("policy %s: %s" % (origin, e)) from e
        policies.append(zone)

    d.read_options({"policy": policy})
    if not policies:
        raise d.error("no policy given")
    return RPZ(zones, policies)
