"""recvmmsg and sendmmsg through ctypes: many datagrams per system call.

Python's socket module reads and writes one datagram per call; under load
the two calls per query and Twisted's read loop around them are a quarter
of the server's time.  Linux has had ``recvmmsg`` (2.6.33) and
``sendmmsg`` (3.0) for years, and glibc exports both, so they are called
through ctypes (no compiled code to build).  ``Batch`` owns one socket's
buffers: ``recv`` reads up to ``size`` datagrams into fixed slots,
``stage`` copies an answer and its destination into the send slots, and
``flush`` writes everything staged with one ``sendmmsg``.

Each slot holds 64 KiB, so a datagram is never cut: the slots live in
anonymous ``mmap`` memory, of which the kernel backs only the pages a
datagram touches (a few pages per slot, not 4 MiB per socket).  Slicing
an ``mmap`` gives ``bytes``, what the rest of the server expects.

``available()`` says whether the calls exist here; without them the
server keeps its one-datagram ``recvfrom``/``sendto`` path.
"""

from __future__ import annotations

import array
import ctypes
import errno
import mmap
import socket
import struct
import sys
from collections.abc import Iterator
from typing import Any, Optional

#: Datagrams read with one recvmmsg (and at most answers per sendmmsg).
SIZE = 64
#: Bytes per slot: the largest UDP payload fits.
SLOT = 65536
#: Bytes per address slot (struct sockaddr_storage).
NAME = 128

MSG_DONTWAIT = 0x40

#: Errors of a receive that mean "nothing more to read now".
READ_AGAIN = frozenset((errno.EAGAIN, errno.EWOULDBLOCK, errno.EINTR,
                        errno.ECONNREFUSED))


class _IOVec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p),
                ("iov_len", ctypes.c_size_t)]


class _MsgHdr(ctypes.Structure):
    _fields_ = [("msg_name", ctypes.c_void_p),
                ("msg_namelen", ctypes.c_uint32),
                ("msg_iov", ctypes.c_void_p),
                ("msg_iovlen", ctypes.c_size_t),
                ("msg_control", ctypes.c_void_p),
                ("msg_controllen", ctypes.c_size_t),
                ("msg_flags", ctypes.c_int)]


class _MMsgHdr(ctypes.Structure):
    _fields_ = [("msg_hdr", _MsgHdr),
                ("msg_len", ctypes.c_uint)]


_STRIDE = ctypes.sizeof(_MMsgHdr)
_NAMELEN = _MsgHdr.msg_namelen.offset
_MSGLEN = _MMsgHdr.msg_len.offset
_IOVLEN = _IOVec.iov_len.offset
_CONTROLLEN = _MsgHdr.msg_controllen.offset
_IOVSIZE = ctypes.sizeof(_IOVec)

_libc: Any = None


def _load() -> Any:
    """glibc's recvmmsg/sendmmsg, or None where they do not exist."""
    global _libc
    if _libc is not None:
        return _libc or None
    _libc = False
    if not sys.platform.startswith("linux"):
        return None
    for name in _libc_names():
        try:
            lib = ctypes.CDLL(name, use_errno=True)
            recv, send = lib.recvmmsg, lib.sendmmsg
        except (OSError, AttributeError):
            continue
        break
    else:
        return None
    recv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint,
                     ctypes.c_int, ctypes.c_void_p]
    recv.restype = ctypes.c_int
    send.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint,
                     ctypes.c_int]
    send.restype = ctypes.c_int
    _libc = (recv, send)
    return _libc


def _libc_names() -> Iterator[Optional[str]]:
    """Where to look for the calls, cheapest first: the symbols the
    interpreter already has (it is linked against the C library), the
    glibc soname, then what ``ctypes.util.find_library`` finds (it runs
    ``ldconfig -p`` in a child process: a fork at every start)."""
    yield None
    yield "libc.so.6"
    import ctypes.util
    name = ctypes.util.find_library("c")
    if name:
        yield name


def available() -> bool:
    """Whether batched system calls can be used on this system."""
    return _load() is not None


#: socket option and control message of the kernel's receive time
#: (struct timespec, CLOCK_REALTIME).
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
_CMSG_HDR = ctypes.sizeof(ctypes.c_size_t) + 2 * ctypes.sizeof(ctypes.c_int)
_CMSG_HDR += -_CMSG_HDR % ctypes.sizeof(ctypes.c_size_t)
_CMSG = struct.Struct("=" + {4: "I", 8: "Q"}[ctypes.sizeof(ctypes.c_size_t)]
                      + "ii")
_TIMESPEC = struct.Struct("=ll")
#: Control bytes per slot: one timespec message, aligned.
CONTROL = 64


class _Slots:
    """``count`` message headers, each with one iovec pointing at its own
    ``SLOT`` bytes of ``data`` and an address slot in ``names``."""

    control: Optional[bytearray] = None

    def __init__(self, count: int) -> None:
        self.data = mmap.mmap(-1, count * SLOT)
        self.names = mmap.mmap(-1, count * NAME)
        self.hdrbuf = bytearray(count * _STRIDE)
        iovbuf = bytearray(count * _IOVSIZE)
        self.hdrs = (_MMsgHdr * count).from_buffer(self.hdrbuf)
        self.iovs = (_IOVec * count).from_buffer(iovbuf)
        self._keep = (iovbuf,)
        data = ctypes.addressof(ctypes.c_char.from_buffer(self.data))
        names = ctypes.addressof(ctypes.c_char.from_buffer(self.names))
        for i in range(count):
            iov = self.iovs[i]
            iov.iov_base = data + i * SLOT
            iov.iov_len = SLOT
            h = self.hdrs[i].msg_hdr
            h.msg_name = names + i * NAME
            h.msg_namelen = NAME
            h.msg_iov = ctypes.addressof(iov)
            h.msg_iovlen = 1
        self.ptr = ctypes.addressof(self.hdrs)
        #: the headers as 32-bit words, the iovecs as size_t words
        self.u32 = memoryview(self.hdrbuf).cast("I")
        self.iov_words = memoryview(iovbuf).cast("N")
        self.words = memoryview(self.hdrbuf).cast("N")


class Batch:
    """One UDP socket's receive and send slots."""

    def __init__(self, fd: int, size: int = SIZE) -> None:
        calls = _load()
        if calls is None:
            raise OSError(errno.ENOSYS, "recvmmsg/sendmmsg unavailable")
        self._recvmmsg, self._sendmmsg = calls
        self.fd = fd
        self.size = size
        self.rx = _Slots(size)
        self.tx = _Slots(size)
        #: answers staged in ``tx`` and not yet sent
        self.staged = 0
        # Word indexes of a header's msg_len and msg_namelen, and of an
        # iovec's iov_len, for slot 0; slot i adds i times the stride.
        self.stride = _STRIDE // 4
        self.len_at = _MSGLEN // 4
        self.namelen_at = _NAMELEN // 4
        self.iov_stride = _IOVSIZE // ctypes.sizeof(ctypes.c_size_t)
        self.iovlen_at = _IOVLEN // ctypes.sizeof(ctypes.c_size_t)
        # The same for the headers as size_t words (msg_controllen).
        self.wstride = _STRIDE // ctypes.sizeof(ctypes.c_size_t)
        self.ctl_at = _CONTROLLEN // ctypes.sizeof(ctypes.c_size_t)
        #: datagrams the last recv read
        self.used = 0
        # What ``stage`` writes to: the send slots' data, addresses, and
        # the word indexes of each slot's msg_namelen and iov_len.
        tx = self.tx
        self._tx_data = tx.data
        self._tx_names = tx.names
        self._tx_u32 = tx.u32
        self._tx_iov = tx.iov_words
        self._tx_namelen = [k * self.stride + self.namelen_at
                            for k in range(size)]
        self._tx_iovlen = [k * self.iov_stride + self.iovlen_at
                           for k in range(size)]
        #: msg_namelen of every slot before a receive (value-result)
        self._full = memoryview(array.array("I", [NAME] * size))

    def timestamps(self, on: bool) -> None:
        """Have the kernel's receive time of every datagram read with it
        (``arrived``), or not.  Off by default: the socket option makes
        the kernel stamp every datagram, and the slots carry control
        messages."""
        sock = socket.socket(fileno=self.fd)
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, int(on))
        finally:
            sock.detach()
        rx = self.rx
        if on and rx.control is None:
            rx.control = bytearray(self.size * CONTROL)
            base = ctypes.addressof(ctypes.c_char.from_buffer(rx.control))
            for i in range(self.size):
                h = rx.hdrs[i].msg_hdr
                h.msg_control = base + i * CONTROL
                h.msg_controllen = CONTROL
        elif not on and rx.control is not None:
            for i in range(self.size):
                h = rx.hdrs[i].msg_hdr
                h.msg_control = None
                h.msg_controllen = 0
            rx.control = None

    def arrived(self, i: int) -> Optional[float]:
        """When datagram ``i`` of the last ``recv`` reached the socket
        (seconds since the epoch), None if the kernel did not say."""
        rx = self.rx
        ctl = rx.control
        if ctl is None:
            return None
        length = rx.words[i * self.wstride + self.ctl_at]
        off = i * CONTROL
        if length < _CMSG_HDR + _TIMESPEC.size:
            return None
        clen, level, kind = _CMSG.unpack_from(ctl, off)
        if level != socket.SOL_SOCKET or kind != SO_TIMESTAMPNS:
            return None
        sec, nsec = _TIMESPEC.unpack_from(ctl, off + _CMSG_HDR)
        return sec + nsec * 1e-9

    def recv(self) -> int:
        """Read up to ``size`` datagrams; 0 when none is waiting.  Each
        datagram i is then ``datagram(i)``."""
        rx = self.rx
        if rx.control is not None:
            # msg_controllen is value-result: give the used slots their
            # room back.
            words, at, stride = rx.words, self.ctl_at, self.wstride
            for i in range(self.used):
                words[i * stride + at] = CONTROL
        n = self._recvmmsg(self.fd, self.rx.ptr, self.size, MSG_DONTWAIT,
                           None)
        if n < 0:
            err = ctypes.get_errno()
            if err in READ_AGAIN:
                return 0
            raise OSError(err, "recvmmsg: " + errno.errorcode.get(err, ""))
        self.used = n
        return n

    def datagram(self, i: int) -> tuple[bytes, bytes]:
        """The bytes and the raw sender address of datagram ``i`` of the
        last ``recv`` (which makes the slot ready for the next one)."""
        rx = self.rx
        u32 = rx.u32
        h = i * self.stride
        ln = u32[h + self.len_at]
        at = h + self.namelen_at
        nl = u32[at]
        u32[at] = NAME
        off = i * SLOT
        noff = i * NAME
        return rx.data[off:off + ln], rx.names[noff:noff + nl]

    def datagrams(self, start: int, n: int) -> list[tuple[bytes, bytes]]:
        """(bytes, raw sender address) of datagrams ``start`` to ``n`` of
        the last ``recv``, as ``datagram`` gives each (which makes their
        slots ready for the next one): one pass for the whole batch."""
        if start >= n:
            return []
        rx = self.rx
        u32 = rx.u32
        st = self.stride
        lens = u32[start * st + self.len_at:n * st:st].tolist()
        at = self.namelen_at
        sizes = u32[start * st + at:n * st:st]
        nls = sizes.tolist()
        sizes[:] = self._full[:n - start]
        data = rx.data
        names = rx.names
        return [(data[off:off + ln], names[noff:noff + nl])
                for off, ln, noff, nl in zip(range(start * SLOT, n * SLOT,
                                                   SLOT),
                                             lens,
                                             range(start * NAME, n * NAME,
                                                   NAME),
                                             nls)]

    def stage(self, wire: bytes, raw: bytes) -> None:
        """Queue ``wire`` for the address ``raw`` (as ``datagram`` gave
        it); a full set of slots is sent first."""
        k = self.staged
        if k == self.size:
            self.flush()
            k = 0
        ln = len(wire)
        if ln > SLOT:
            wire = wire[:SLOT]
            ln = SLOT
        off = k * SLOT
        self._tx_data[off:off + ln] = wire
        nl = len(raw)
        off = k * NAME
        self._tx_names[off:off + nl] = raw
        self._tx_u32[self._tx_namelen[k]] = nl
        self._tx_iov[self._tx_iovlen[k]] = ln
        self.staged = k + 1

    def flush(self) -> list[tuple[int, bytes]]:
        """Send every staged answer.  Returns (errno, raw address) of the
        answers the kernel refused (each is skipped, the rest still
        sent)."""
        n = self.staged
        self.staged = 0
        failed: list[tuple[int, bytes]] = []
        done = 0
        send, fd, ptr = self._sendmmsg, self.fd, self.tx.ptr
        while done < n:
            r = send(fd, ptr + done * _STRIDE, n - done, 0)
            if r > 0:
                done += r
                continue
            err = ctypes.get_errno() if r < 0 else errno.EAGAIN
            noff = done * NAME
            nl = self.tx.u32[done * self.stride + self.namelen_at]
            failed.append((err, self.tx.names[noff:noff + nl]))
            done += 1
        return failed


_V4 = struct.Struct("!H4s")
_V6 = struct.Struct("!HI16s")
_SCOPE = struct.Struct("=I")
_FAMILY = struct.Struct("=H")
_MAPPED = b"\x00" * 10 + b"\xff\xff"


def peer(raw: bytes) -> Optional[tuple[str, int, tuple[Any, ...]]]:
    """(client, port, address for sendto) of a raw socket address: the
    client as the server reports it (``::ffff:`` mapped addresses as
    IPv4, a scoped address with its interface), None if not IP."""
    fam = _FAMILY.unpack_from(raw, 0)[0] if len(raw) >= 2 else 0
    if fam == socket.AF_INET and len(raw) >= 8:
        port, a4 = _V4.unpack_from(raw, 2)
        host = socket.inet_ntop(socket.AF_INET, a4)
        return host, port, (host, port)
    if fam == socket.AF_INET6 and len(raw) >= 28:
        port, flow, a6 = _V6.unpack_from(raw, 2)
        scope = _SCOPE.unpack_from(raw, 24)[0]
        text = socket.inet_ntop(socket.AF_INET6, a6)
        host = text
        if a6[:12] == _MAPPED:
            host = socket.inet_ntop(socket.AF_INET, a6[12:])
        elif scope:
            try:
                host = "%s%%%s" % (text, socket.if_indextoname(scope))
            except OSError:
                host = "%s%%%d" % (text, scope)
        return host, port, (text, port, flow, scope)
    return None
