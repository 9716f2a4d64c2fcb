"""DNS over TLS on the standard library's ssl: the TLS records and the
DNS stream framing in one protocol on the TCP connection.

``TLSSession`` is the server side of one TLS connection over memory
BIOs (``ssl.SSLObject``): ciphertext in, plaintext out and back, a C
call each way.  ``DoTProtocol`` is the DNS stream protocol
(stream.DNSStreamProtocol: its limits, timeouts and producer) with that
session folded in: what one read brings is decrypted, split into its
2-byte-length messages and handed to the mux, and the answers ready by
the end are encrypted together and written with one call, straight to
the socket when nothing waits before them.  The reads of all the DoT
connections in one turn of the reactor are served together, in three
passes (``_Round``).  An answer that comes later (a Deferred) is written
when it comes.

It serves the settings the standard library can express
(tlsconfig.ServerTLS.ssl_context); the others stay on Twisted's TLS
layer over pyOpenSSL (dot.py chooses per connection).
"""

import ssl

from twisted.protocols import policies
from twisted.protocols.tls import TLSMemoryBIOFactory
from twisted.python import log

from corednstw.dnsserver.stream import (
    UNSENT_LIMIT,
    DNSStreamProtocol,
    _buffered,
    socket_transport,
)

#: Plaintext read per call: more than one TLS record holds.
_READ = 17 * 1024
#: Answers are encrypted and written once this much waits (a full TLS
#: record's worth) even inside a read, so that the send buffer's limit
#: (UNSENT_LIMIT) is checked as often as with one write per answer.
FLUSH_AT = 16 * 1024

assert FLUSH_AT < UNSENT_LIMIT

_WantRead = ssl.SSLWantReadError
_Closed = ssl.SSLZeroReturnError
_Error = ssl.SSLError


class TLSSession:
    """The server side of one TLS connection over memory BIOs.

    ``receive(data)`` takes ciphertext and returns the plaintext it
    completes; ``send(data)`` encrypts; ``take()`` is the ciphertext to
    put on the wire (handshake messages, alerts, records).  A TLS error
    is raised as ssl.SSLError; the peer's close_notify makes ``closed``
    true (nothing is read after it)."""

    __slots__ = ("incoming", "outgoing", "obj", "ready", "closed",
                 "_read", "_write")

    def __init__(self, context):
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.obj = context.wrap_bio(self.incoming, self.outgoing,
                                    server_side=True)
        self.ready = False      # the handshake is done
        self.closed = False     # the peer sent close_notify
        # The C object under SSLObject, when there is one: a Python
        # call less per record.
        inner = getattr(self.obj, "_sslobj", self.obj)
        self._read = inner.read
        self._write = inner.write

    def receive(self, data):
        """The plaintext ``data`` completes (b"" when none)."""
        got = self.records(data)
        if len(got) == 1:
            return got[0]
        return b"".join(got)

    def records(self, data):
        """The plaintext ``data`` completes, one item per TLS record."""
        incoming = self.incoming
        if data:
            incoming.write(data)
        if not self.ready:
            try:
                self.obj.do_handshake()
            except _WantRead:
                return []
            self.ready = True
        read = self._read
        got = []
        # A record is read whole or not at all: while ciphertext is left,
        # try; the last, partial record says so with SSLWantReadError.
        while incoming.pending:
            try:
                chunk = read(_READ)
            except _WantRead:
                break
            except _Closed:
                self.closed = True
                break
            if not chunk:       # close_notify, as the ssl module says it
                self.closed = True
                break
            got.append(chunk)
        return got

    def send(self, data):
        self._write(data)

    def take(self):
        """The ciphertext to send (b"" when none)."""
        out = self.outgoing
        return out.read() if out.pending else b""

    def shut(self):
        """Write close_notify (once the handshake is done)."""
        if self.ready:
            try:
                self.obj.unwrap()
            except _Error:
                pass    # close_notify is written; the peer's is not read


class DoTProtocol(DNSStreamProtocol):
    """A DoT connection: DNSStreamProtocol's rules (timeouts, max
    queries, UNSENT_LIMIT and MAX_PENDING, closing once the answers are
    sent), with the TLS session and the framing in this one protocol
    (see the module's docstring).  ``self.transport`` is the TCP
    connection (or the PROXY protocol reader in front of it)."""

    def __init__(self, mux, local, timeouts, context):
        super().__init__(mux, local, timeouts)
        self.tls = TLSSession(context)
        self._plain = b""       # decrypted bytes not yet framed
        self._out = []          # answer frames to encrypt
        self._outlen = 0
        self._failed = False
        self._queued = False    # waiting for the round (_Round)
        self._expired = False   # a timeout fired while queued
        self._bottom = None     # the socket's transport
        self._sender = self._send

    def connectionMade(self):
        DNSStreamProtocol.connectionMade(self)
        self._bottom = socket_transport(self.transport)
        if not _ROUND.hooked:
            from twisted.internet import reactor
            _ROUND.hook(reactor)

    def dataReceived(self, data):
        if self._failed:
            return
        if ROUND:
            # Decrypted and answered with the other connections' reads
            # of this turn of the reactor (see _Round); until then the
            # answers that come are held.
            if data:
                self.tls.incoming.write(data)
            if not self._queued:
                self._queued = True
                self._reading = True
                _ROUND.add(self)
            return
        self._reading = True
        try:
            if self._decrypt(data):
                self._answer()
        finally:
            self._reading = False
        self._done()

    def _decrypt(self, data=b""):
        """Take in ``data`` (or what the incoming BIO holds): the
        plaintext to frame, the handshake's messages sent.  False after a
        TLS error (the connection is closing)."""
        t = self.transport
        if self._failed or t is None or t.disconnecting:
            return False    # closed since the read (nothing is read after)
        tls = self.tls
        try:
            plain = tls.receive(data)
        except _Error:
            self._fail()
            return False
        if tls.outgoing.pending:
            self._push(tls.take())  # handshake messages, tickets
        if plain:
            self._plain = self._plain + plain if self._plain else plain
        return True

    def _answer(self):
        """Answer the whole queries read."""
        t = self.transport
        if self._plain and not self.paused and not self._failed and \
                t is not None and not t.disconnecting:
            self._frames()

    def _done(self):
        """Send the answers made, close after the peer's close_notify or
        once a timeout that expired while the read waited for its round
        finds no query in it."""
        self._queued = False
        self._reading = False
        if self._out:
            self._flush()
        if self._expired:
            self._expired = False
            t = self.transport
            if t is not None and not t.disconnected:
                t.abortConnection()
            return
        if self.tls.closed and not self._failed:
            self.close()

    def timeoutConnection(self):
        # What was read before the timer fired waits for its round: a
        # query in it is answered (and sets the idle timer again), as it
        # would have been had it been answered at once.
        if self._queued:
            self._expired = True
            return
        DNSStreamProtocol.timeoutConnection(self)

    def _frames(self):
        """Hand every whole message read to the mux (until paused)."""
        buf = self._plain
        end = len(buf)
        at = 0
        handle = self.factory.mux.handle
        host, port, local, send = self.host, self.port, self.local, \
            self._sender
        limit = self.limits.max_queries
        took = 0
        while end - at >= 2:
            stop = at + 2 + ((buf[at] << 8) | buf[at + 1])
            if stop > end:
                break
            msg = buf[at + 2:stop]
            at = stop
            took += 1
            if limit > 0:   # max_queries reads the count as it goes
                self.queries += 1
            # The factory's mux is read per query in the base class: a
            # reload between two reads is seen at the next read here.
            result = handle(msg, host, port, "tcp", local, send)
            if result is not None and result is not False:
                self.pending += 1
                result.addBoth(self._answered)
                self._throttle()
            elif limit > 0:
                self._throttle()
            if self.paused:
                break
        if limit <= 0:
            self.queries += took
        self._plain = buf[at:] if at else buf
        if took:
            self._expired = False
            if not self._full:
                self.setTimeout(self.limits.idle)

    def _send(self, wire):
        # An answer that arrives after the client left (or once the
        # connection is closing) is dropped by _flush, which checks the
        # transport: once per write, not per answer.
        n = len(wire)
        if n > 65535:
            wire = wire[:65535]
            n = 65535
        out = self._out
        out.append(n.to_bytes(2, "big"))
        out.append(wire)
        n = self._outlen = self._outlen + n + 2
        if n >= FLUSH_AT or not self._reading:
            self._flush()

    def _flush(self):
        """Encrypt the answers waiting and write them in one call."""
        out = self._out
        self._out = []
        self._outlen = 0
        t = self.transport
        if t is None or t.disconnecting or t.disconnected:
            return
        self.tls.send(out[0] if len(out) == 1 else b"".join(out))
        if self._push(self.tls.take()):
            return
        if self._write_check is None and _buffered(t):
            self._write_check = self.callLater(
                self.limits.write, self._check_write, self._sent)

    def _push(self, data):
        """Write ciphertext: straight to the socket when nothing waits in
        the transport's buffer (no wait for the reactor's next turn), the
        rest through the transport (which also reports a send's error).
        True when the socket took it all."""
        if not data:
            return True
        sent = _send_now(self._bottom, data)
        if sent > 0:
            self._sent += sent
            if sent == len(data):
                return True
            data = data[sent:]
        self.transport.write(data)
        return False

    def _fail(self):
        """A TLS error (a failed handshake, a record that does not
        decrypt): send the alert OpenSSL wrote and close."""
        self._failed = True
        self._plain = b""
        self._out = []
        t = self.transport
        if t is None or t.disconnecting:
            return
        self._push(self.tls.take())
        t.unregisterProducer()
        t.loseConnection()

    def close(self):
        """Close once the answers written are sent, with close_notify."""
        t = self.transport
        if t is not None and not t.disconnecting:
            if self._out:
                self._flush()
            if not self._failed:
                self.tls.shut()
                self._push(self.tls.take())
            t.unregisterProducer()
            t.loseConnection()


#: Serve the reads of one turn of the reactor together (_Round); False:
#: each read at once, as it comes.
ROUND = True


class _Round:
    """The DoT connections that read something in this turn of the
    reactor.  Their reads are served together once the reactor has
    handed out the turn's events: every read is decrypted, then every
    query answered, then each connection's answers encrypted and sent
    with one call.  The chain's code and data then stay in the
    processor's caches over the queries of all the connections instead
    of being pushed out by each connection's TLS records and system
    calls in between; a connection's own queries keep their order.

    The round runs at the end of the reactor's poll (``hook``: no timed
    call per turn); what is read outside a poll (a connection resumed by
    an answer that came later) is served by a call due at once."""

    def __init__(self):
        self.conns = []
        self.polling = False    # inside the hooked reactor's poll
        self.hooked = False

    def hook(self, reactor):
        """End each poll of ``reactor`` with the round (where it has
        doIteration, as every reactor of twisted.internet does)."""
        self.hooked = True
        poll = getattr(reactor, "doIteration", None)
        if poll is None:
            return

        def doIteration(timeout):
            self.polling = True
            try:
                poll(timeout)
            finally:
                self.polling = False
            if self.conns:
                self.run()
        reactor.doIteration = doIteration

    def add(self, conn):
        if not self.conns and not self.polling:
            conn.callLater(0, self.run)
        self.conns.append(conn)

    def run(self):
        conns = self.conns
        self.conns = []
        # Three passes: every read decrypted, every query answered, every
        # connection's answers sent.
        for c in conns:
            try:
                c._decrypt()
            except Exception:
                log.err(None, "DoT read")
        for c in conns:
            try:
                c._answer()
            except Exception:
                log.err(None, "DoT queries")
        for c in conns:
            try:
                c._done()
            except Exception:
                log.err(None, "DoT answers")


_ROUND = _Round()


# -- any protocol over TLS ---------------------------------------------------

class TLSServerProtocol(policies.ProtocolWrapper):
    """Server side TLS on the standard library's ssl in front of any
    protocol (the role of Twisted's TLSMemoryBIOProtocol).

    What one read brings is decrypted and handed on one TLS record at a
    time, as Twisted's layer does: an HTTP/2 server answering at the end
    of each read then answers each request record with its own record.
    Each ``write`` is encrypted at once into its own record (one record
    per write, as Go's server writes): dnsperf's DoH client takes one
    answer per record it reads and loses the others a record holds.  The
    records written during a read are sent together at its end, and any
    write goes straight to the socket when nothing waits before it in
    the TCP transport (no wait for the reactor's next turn).  Writes
    made before the handshake is done are sent after it.  The producer
    of the protocol underneath is registered with the TCP transport
    itself: nothing is held here."""

    def __init__(self, factory, wrapped, context):
        super().__init__(factory, wrapped)
        self.tls = TLSSession(context)
        self._early = []        # writes before the handshake
        self._held = []         # ciphertext written during a read
        self._reading = False
        self._failed = False
        self._bottom = None     # the socket's transport

    def makeConnection(self, transport):
        self._bottom = socket_transport(transport)
        super().makeConnection(transport)

    @property
    def negotiatedProtocol(self):
        """The ALPN protocol chosen (bytes), or None."""
        if not self.tls.ready:
            return None
        name = self.tls.obj.selected_alpn_protocol()
        return name.encode("ascii") if name else None

    def dataReceived(self, data):
        if self._failed:
            return
        tls = self.tls
        ready = tls.ready
        try:
            records = tls.records(data)
        except _Error:
            self._fail()
            return
        if tls.ready and not ready and self._early:
            early, self._early = self._early, []
            tls.send(b"".join(early))
        out = tls.take()
        if records:
            held = self._held
            if out:
                held.append(out)
            self._reading = True
            try:
                deliver = self.wrappedProtocol.dataReceived
                for plain in records:
                    deliver(plain)
            finally:
                self._reading = False
                if held:
                    self._held = []
                    self._push(held[0] if len(held) == 1
                               else b"".join(held))
        elif out:
            self._push(out)
        if tls.closed:
            self.loseConnection()

    def write(self, data):
        if self.disconnecting or self._failed or not data:
            return
        tls = self.tls
        if not tls.ready:
            self._early.append(data)
            return
        tls.send(data)
        if self._reading:
            self._held.append(tls.take())
        else:
            self._push(tls.take())

    def writeSequence(self, data):
        self.write(b"".join(data))

    def _push(self, data):
        """Write ciphertext: straight to the socket when nothing waits in
        the TCP transport's buffer, the rest through the transport (which
        also reports a send's error)."""
        sent = _send_now(self._bottom, data)
        if sent == len(data):
            return
        if sent > 0:
            data = data[sent:]
        self.transport.write(data)

    def _release(self):
        """Send what a read holds (before a close_notify or an alert)."""
        if self._held:
            held, self._held = self._held, []
            self._push(b"".join(held))

    def loseConnection(self):
        """Close after close_notify (the TCP transport sends what was
        written first)."""
        if self.disconnecting:
            return
        self.disconnecting = 1
        self._release()
        if not self._failed:
            self.tls.shut()
            out = self.tls.take()
            if out:
                self._push(out)
        self.transport.unregisterProducer()
        self.transport.loseConnection()

    def _fail(self):
        self._failed = True
        self._release()
        out = self.tls.take()
        if out:
            self._push(out)
        self.disconnecting = 1
        self.transport.unregisterProducer()
        self.transport.loseConnection()


class TLSFactory(TLSMemoryBIOFactory):
    """Wraps ``wrapped``'s connections in TLS: TLSServerProtocol where
    the current settings of ``creator`` (a tlsconfig.Switchable) have a
    standard library context, else Twisted's TLS layer over pyOpenSSL.
    A drop-in for ``TLSMemoryBIOFactory(creator, False, wrapped)``."""

    def __init__(self, creator, wrapped):
        super().__init__(creator, False, wrapped)
        self.creator = creator

    def buildProtocol(self, addr):
        context = fast_context(self.creator)
        if context is None:
            return super().buildProtocol(addr)
        inner = self.wrappedFactory.buildProtocol(addr)
        if inner is None:
            return None
        return TLSServerProtocol(self, inner, context)


def _send_now(t, data):
    """Send ``data`` on TCP transport ``t``'s socket at once when nothing
    waits in its buffer (no wait for the reactor's next turn); the octets
    the socket took, 0 when it took none or must not be written now (the
    caller hands the rest to the transport, which reports errors)."""
    if (t is None or t.dataBuffer or t._tempDataLen or not t.connected
            or t.disconnecting):
        return 0
    try:
        return t.socket.send(data)
    except OSError:
        return 0


def fast_context(creator):
    """The standard library context of ``creator``'s current settings
    (its ALPN list), or None when only pyOpenSSL can serve them."""
    fast = getattr(creator.tls, "ssl_context", None)
    return fast(creator.alpn) if fast is not None else None
