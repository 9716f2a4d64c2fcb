"""A DNS server in a thread of its own, for what the service asks while
its event loop waits: forward's host names are looked up while the
Corefile is read, so a resolver on the test's reactor could never answer.

``ThreadedResolver({"up.example.test": ["127.0.0.1"]})`` answers A and
AAAA from the table (NODATA for the other family), NXDOMAIN for other
names, and records every question; ``stop()`` at test cleanup.
"""

import ipaddress
import socket
import threading

import dns.message
import dns.rcode
import dns.rdatatype
import dns.rrset


class ThreadedResolver:

    def __init__(self, testcase, addresses):
        self.addresses = {name.lower().rstrip(".") + ".": list(ips)
                          for name, ips in addresses.items()}
        self.queries = []       # (name lower, type text)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True,
                                       name="threaded-resolver")
        self.thread.start()
        testcase.addCleanup(self.stop)

    def stop(self):
        self.stopping.set()
        self.thread.join()
        self.sock.close()

    def count(self, name, qtype):
        return self.queries.count((name.lower(), qtype))

    def _run(self):
        while not self.stopping.is_set():
            try:
                data, addr = self.sock.recvfrom(65535)
            except socket.timeout:
                continue
            q = dns.message.from_wire(data)
            self.sock.sendto(self._answer(q).to_wire(), addr)

    def _answer(self, q):
        question = q.question[0]
        name = str(question.name).lower()
        qtype = dns.rdatatype.to_text(question.rdtype)
        self.queries.append((name, qtype))
        r = dns.message.make_response(q)
        if name not in self.addresses:
            r.set_rcode(dns.rcode.NXDOMAIN)
            return r
        version = 4 if qtype == "A" else 6
        ips = [ip for ip in self.addresses[name]
               if ipaddress.ip_address(ip).version == version]
        if ips and qtype in ("A", "AAAA"):
            r.answer.append(dns.rrset.from_text_list(
                question.name, 60, "IN", qtype, ips))
        return r
