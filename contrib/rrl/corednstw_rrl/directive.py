"""rrl's Corefile stanza, as coredns/rrl reads it (its error texts
included)."""

from corednstw.core import goparse
from corednstw.core.plugin import zones_from_args
from corednstw_rrl.plugin import (
    ERROR,
    NODATA,
    NXDOMAIN,
    REFERRAL,
    RRL,
    SECOND,
)

#: The allowances that default to responses-per-second when not given.
_SAME_AS_RESPONSES = {"nodata-per-second": NODATA,
                      "nxdomains-per-second": NXDOMAIN,
                      "referrals-per-second": REFERRAL,
                      "errors-per-second": ERROR}


def setup(d, block):
    r = RRL()
    r.zones = zones_from_args(d.args, block)
    r.all_zones = "." in r.zones
    given = {}

    def number(c):
        """The option's one argument as Go's ParseFloat reads it."""
        text = c.one()
        try:
            return goparse.parse_float(text)
        except ValueError as e:
            raise c.error("%s invalid value. %s" % (text, e)) from e

    def allowance(c):
        """A per-second allowance as nanoseconds per response (0:
        none), truncated as coredns/rrl does."""
        rps = number(c)
        if rps < 0:
            raise c.error("%s cannot be negative" % c.args[0])
        return int(SECOND / rps) if rps else 0

    def window(c):
        value = number(c)
        if value <= 0:
            raise c.error("window must be greater than zero")
        r.window = int(value * SECOND)

    def prefix_length(bits):
        def read(c):
            text = c.one()
            n = c.integer(text, error=text + " invalid value. %s")
            if not 0 < n <= bits:
                raise c.error("%s must be between 1 and %d" % (text, bits))
            setattr(r, "v4_prefix" if bits == 32 else "v6_prefix", n)
        return read

    def responses(c):
        r.intervals[0] = allowance(c)

    def same_as_responses(c):
        given[_SAME_AS_RESPONSES[c.name]] = allowance(c)

    def slip(c):
        text = c.one()
        n = c.integer(text, error="slip-ratio '%s' invalid value. %%s"
                      % text)
        if not 0 <= n <= 10:
            raise c.error("slip-ratio '%s' must be between 0 and 10" % text)
        r.slip = n

    def requests(c):
        r.requests_interval = allowance(c)

    def max_table(c):
        text = c.one()
        n = c.integer(text, error=text + " invalid value. %s")
        if n < 0:
            raise c.error("%s cannot be negative" % text)
        r.max_table = n

    def report_only(c):
        c.no_args()
        r.report_only = True

    options = {
        "window": window,
        "ipv4-prefix-length": prefix_length(32),
        "ipv6-prefix-length": prefix_length(128),
        "responses-per-second": responses,
        "slip-ratio": slip,
        "requests-per-second": requests,
        "max-table-size": max_table,
        "report-only": report_only,
    }
    options.update(dict.fromkeys(_SAME_AS_RESPONSES, same_as_responses))
    d.read_options(options)
    for cat in _SAME_AS_RESPONSES.values():
        r.intervals[cat] = given.get(cat, r.intervals[0])
    return r
