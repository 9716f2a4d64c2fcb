"""The integer limits of the listener plugins (quic, https, https3,
grpc_server): ``NAME { option N ... }`` blocks CoreDNS reads alike, with
the same words for a bad value, a value out of range and an option given
twice."""


def read_limits(d, names, zero=False):
    """{option: value} of the directive's block of integer options named
    in ``names``, each given at most once: positive, or with ``zero``
    non-negative (the https, https3 and grpc_server limits, where 0 means
    none).  The directive takes no arguments."""
    d.no_args()
    kind = "non-negative" if zero else "positive"
    values = {}

    def option(c):
        n = c.integer(c.one(), lo=0 if zero else 1,
                      error="invalid " + c.name + " value '{text}': {reason}",
                      range_error="%s must be a %s integer: {reason}"
                      % (c.name, kind))
        if c.name in values:
            raise c.error("%s already defined for this server block"
                          % c.name)
        values[c.name] = n

    d.read_options(dict.fromkeys(names, option))
    return values
