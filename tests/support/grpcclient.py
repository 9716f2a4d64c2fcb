"""A gRPC client for CoreDNS's DnsService, generated at test time from
tests/support/dns.proto with grpcio-tools (nothing generated is kept in
the tree)."""

import importlib
import os
import shutil
import sys
import tempfile

_MODULES = None


def modules():
    """(dns_pb2, dns_pb2_grpc), generated once per process."""
    global _MODULES
    if _MODULES is None:
        from grpc_tools import protoc
        out = tempfile.mkdtemp(prefix="corednstw-grpc-")
        here = os.path.dirname(os.path.abspath(__file__))
        shutil.copy(os.path.join(here, "dns.proto"), out)
        code = protoc.main(["protoc", "-I" + out, "--python_out=" + out,
                            "--grpc_python_out=" + out,
                            os.path.join(out, "dns.proto")])
        if code != 0:
            raise RuntimeError("protoc failed: %d" % code)
        sys.path.insert(0, out)
        try:
            _MODULES = (importlib.import_module("dns_pb2"),
                        importlib.import_module("dns_pb2_grpc"))
        finally:
            sys.path.remove(out)
    return _MODULES


def query(port, wire, ca=None, servername=None, timeout=5):
    """One Query call (blocking: run it in a thread); the answer's bytes,
    or grpc.RpcError."""
    import grpc
    pb2, pb2_grpc = modules()
    target = "127.0.0.1:%d" % port
    if ca is None:
        channel = grpc.insecure_channel(target)
    else:
        with open(ca, "rb") as f:
            creds = grpc.ssl_channel_credentials(f.read())
        channel = grpc.secure_channel(target, creds, [
            ("grpc.ssl_target_name_override", servername)])
    with channel:
        stub = pb2_grpc.DnsServiceStub(channel)
        return stub.Query(pb2.DnsPacket(msg=wire), timeout=timeout).msg


def serve(answer, address="127.0.0.1:0"):
    """A grpcio DnsService server on ``address`` (127.0.0.1, or a
    ``unix:PATH`` socket) whose Query returns ``answer(wire, context)``
    (which may abort the call with ``context.abort``): an upstream that
    misbehaves on purpose.  Returns (server, port); stop it with
    ``server.stop(None)``."""
    from concurrent import futures

    import grpc
    pb2, pb2_grpc = modules()

    class Service(pb2_grpc.DnsServiceServicer):
        def Query(self, request, context):
            return pb2.DnsPacket(msg=answer(request.msg, context))

    server = grpc.server(futures.ThreadPoolExecutor(2))
    pb2_grpc.add_DnsServiceServicer_to_server(Service(), server)
    port = server.add_insecure_port(address)
    server.start()
    return server, port
