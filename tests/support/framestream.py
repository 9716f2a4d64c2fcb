"""A test-side dnstap collector: the reading end of a bidirectional Frame
Streams connection, decoding every data frame with the protobuf library.

The dnstap schema (dnstap.proto, proto2) is built here from descriptors,
so no protoc is needed; it is an independent check of the plugin's hand
encoding.
"""

import struct

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from twisted.internet import defer, protocol

CONTENT_TYPE = b"protobuf:dnstap.Dnstap"
ACCEPT, START, STOP, READY, FINISH = 1, 2, 3, 4, 5

_F = descriptor_pb2.FieldDescriptorProto


def _schema():
    fd = descriptor_pb2.FileDescriptorProto(
        name="dnstap_test.proto", package="dnstap", syntax="proto2")

    def enum(container, name, values):
        e = container.enum_type.add(name=name)
        for n, v in values:
            e.value.add(name=n, number=v)

    def field(msg, name, number, ftype, label=_F.LABEL_OPTIONAL,
              type_name=None):
        f = msg.field.add(name=name, number=number, type=ftype, label=label)
        if type_name:
            f.type_name = type_name

    enum(fd, "SocketFamily", [("INET", 1), ("INET6", 2)])
    enum(fd, "SocketProtocol", [("UDP", 1), ("TCP", 2), ("DOT", 3),
                                ("DOH", 4), ("DNSCryptUDP", 5),
                                ("DNSCryptTCP", 6), ("DOQ", 7)])
    d = fd.message_type.add(name="Dnstap")
    enum(d, "Type", [("MESSAGE", 1)])
    field(d, "identity", 1, _F.TYPE_BYTES)
    field(d, "version", 2, _F.TYPE_BYTES)
    field(d, "extra", 3, _F.TYPE_BYTES)
    field(d, "message", 14, _F.TYPE_MESSAGE, type_name=".dnstap.Message")
    field(d, "type", 15, _F.TYPE_ENUM, _F.LABEL_REQUIRED,
          ".dnstap.Dnstap.Type")
    m = fd.message_type.add(name="Message")
    enum(m, "Type", [
        ("AUTH_QUERY", 1), ("AUTH_RESPONSE", 2), ("RESOLVER_QUERY", 3),
        ("RESOLVER_RESPONSE", 4), ("CLIENT_QUERY", 5),
        ("CLIENT_RESPONSE", 6), ("FORWARDER_QUERY", 7),
        ("FORWARDER_RESPONSE", 8), ("STUB_QUERY", 9), ("STUB_RESPONSE", 10),
        ("TOOL_QUERY", 11), ("TOOL_RESPONSE", 12), ("UPDATE_QUERY", 13),
        ("UPDATE_RESPONSE", 14)])
    field(m, "type", 1, _F.TYPE_ENUM, _F.LABEL_REQUIRED,
          ".dnstap.Message.Type")
    field(m, "socket_family", 2, _F.TYPE_ENUM,
          type_name=".dnstap.SocketFamily")
    field(m, "socket_protocol", 3, _F.TYPE_ENUM,
          type_name=".dnstap.SocketProtocol")
    field(m, "query_address", 4, _F.TYPE_BYTES)
    field(m, "response_address", 5, _F.TYPE_BYTES)
    field(m, "query_port", 6, _F.TYPE_UINT32)
    field(m, "response_port", 7, _F.TYPE_UINT32)
    field(m, "query_time_sec", 8, _F.TYPE_UINT64)
    field(m, "query_time_nsec", 9, _F.TYPE_FIXED32)
    field(m, "query_message", 10, _F.TYPE_BYTES)
    field(m, "query_zone", 11, _F.TYPE_BYTES)
    field(m, "response_time_sec", 12, _F.TYPE_UINT64)
    field(m, "response_time_nsec", 13, _F.TYPE_FIXED32)
    field(m, "response_message", 14, _F.TYPE_BYTES)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    get = message_factory.GetMessageClass
    return (get(pool.FindMessageTypeByName("dnstap.Dnstap")),
            get(pool.FindMessageTypeByName("dnstap.Message")))


Dnstap, Message = _schema()


def decode(payload):
    """A dnstap.Dnstap from frame bytes (ParseFromString checks required
    fields)."""
    d = Dnstap()
    d.ParseFromString(payload)
    return d


def control(ftype, content_type=None):
    body = struct.pack("!I", ftype)
    if content_type is not None:
        body += struct.pack("!II", 1, len(content_type)) + content_type
    return b"\x00\x00\x00\x00" + struct.pack("!I", len(body)) + body


class Reader(protocol.Protocol):
    """Answers READY with ACCEPT, collects data frames after START, answers
    STOP with FINISH.  ``frames`` holds decoded Dnstap messages;
    ``events`` the control frame types seen."""

    def __init__(self, collector):
        self.collector = collector
        self.buf = b""
        self.started = False

    def connectionMade(self):
        self.collector.connections.append(self)

    def dataReceived(self, data):
        self.buf += data
        while len(self.buf) >= 4:
            n = struct.unpack_from("!I", self.buf)[0]
            if n == 0:
                if len(self.buf) < 8:
                    return
                clen = struct.unpack_from("!I", self.buf, 4)[0]
                if len(self.buf) < 8 + clen:
                    return
                body = self.buf[8:8 + clen]
                self.buf = self.buf[8 + clen:]
                self._control(body)
            else:
                if len(self.buf) < 4 + n:
                    return
                payload = self.buf[4:4 + n]
                self.buf = self.buf[4 + n:]
                if not self.started:
                    raise AssertionError("data frame before START")
                self.collector.frames.append(decode(payload))

    def _control(self, body):
        ftype = struct.unpack_from("!I", body)[0]
        self.collector.events.append(ftype)
        if ftype == READY:
            if CONTENT_TYPE not in body:
                raise AssertionError("READY without dnstap content type")
            self.transport.write(control(ACCEPT, CONTENT_TYPE))
        elif ftype == START:
            self.started = True
        elif ftype == STOP:
            self.transport.write(control(FINISH))

    def connectionLost(self, reason):
        self.collector.closed += 1
        if self.collector.lost is not None and not self.collector.lost.called:
            self.collector.lost.callback(None)


class Collector(protocol.Factory):
    """Factory of Readers sharing one list of frames (server or client)."""

    noisy = False

    def __init__(self):
        self.frames = []
        self.events = []
        self.connections = []
        self.closed = 0
        self.lost = None

    def buildProtocol(self, addr):
        p = Reader(self)
        p.factory = self
        return p

    def wait_closed(self):
        self.lost = defer.Deferred()
        return self.lost


class ClientCollector(Collector, protocol.ClientFactory):
    pass
