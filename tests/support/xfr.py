"""Zone-transfer helpers: an AXFR/IXFR query and the records of the
replies as text lines."""

import dns.message
import dns.rdatatype
import dns.rrset

from corednstw.core.request import parse_response


def axfr(zone, serial=None):
    q = dns.message.make_query(zone, "IXFR" if serial else "AXFR")
    if serial is not None:
        q.authority.append(dns.rrset.from_text(
            zone, 0, "IN", "SOA", "ns. a. %d 1 1 1 1" % serial))
    return q.to_wire()


def transferred(replies):
    out = []
    for data in replies:
        m = parse_response(data)
        assert m.rcode == 0, m
        for rr in m.answer:
            out.append("%s %d %s %s" % (rr.name, rr.ttl,
                                        dns.rdatatype.to_text(rr.rtype),
                                        rr.rdata_obj().to_text()))
    return out
