"""on: runs a command when the server starts, reloads or shuts down.

``on startup|shutdown|certrenew COMMAND [ARGS...] [&]``, as CoreDNS's
``on`` (coredns/caddy's onevent).  ``startup`` runs once the configuration
is live: at start and after every reload.  ``shutdown`` runs when the
server stops (not when a reload retires a configuration).  ``certrenew``
is accepted and never happens: no certificate is renewed here.

A command ending in ``&`` runs in the background; the others run one
after the other and the event waits for them (the shutdown waits before
the process exits).  Either way the reactor is never blocked: commands
are child processes, their output copied line by line to the server's
output, and their failures logged.
"""

import os
import shlex
import shutil
import uuid

from twisted.internet import defer, protocol

from corednstw.core import logger
from corednstw.core.plugin import Plugin

EVENTS = ("startup", "shutdown", "certrenew")


class Hook:
    """One ``on`` line: an event, a command, its arguments."""

    def __init__(self, event, command, args):
        self.event = event
        self.command = command
        self.args = args
        self.background = bool(args) and args[-1] == "&"
        if self.background:
            self.args = args[:-1]
        self.id = str(uuid.uuid4())


class _Output(protocol.ProcessProtocol):
    """Copies a command's output to the log stream; fires ``done`` with
    the exit code (or the signal's name) when the process has ended."""

    def __init__(self):
        self.done: defer.Deferred[BaseException] = defer.Deferred()
        self.partial = {1: b"", 2: b""}

    def connectionMade(self):
        assert self.transport is not None   # set by makeConnection
        self.transport.closeStdin()     # there is no standard input

    def childDataReceived(self, fd, data):
        buf = self.partial.get(fd, b"") + data
        *lines, self.partial[fd] = buf.split(b"\n")
        for line in lines:
            logger.raw(line.decode("utf-8", "replace"))

    def processEnded(self, reason):
        for fd, rest in self.partial.items():
            if rest:
                logger.raw(rest.decode("utf-8", "replace"))
        self.done.callback(reason.value)


def _executable(command):
    """The path of ``command`` as exec.Command looks it up, or None."""
    if os.sep in command:
        return command if os.access(command, os.X_OK) else None
    return shutil.which(command)


class On(Plugin):
    name = "on"
    in_chain = False
    runs_in = "supervisor"
    once = False

    def __init__(self):
        self.hooks = []
        self.shut_down = False

    def run(self, hook):
        """Start ``hook``'s command; a Deferred firing when it has ended
        (at once for a background command)."""
        how = "Nonblocking" if hook.background else "Blocking"
        logger.info("", '%s Command "%s %s" with ID %s'
                    % (how, hook.command, " ".join(hook.args), hook.id))
        path = _executable(hook.command)
        if path is None:
            logger.error("", 'on-%s: exec: "%s": executable file not found '
                         "in $PATH" % (hook.id, hook.command))
            return defer.succeed(None)
        out = _Output()
        try:
            self.reactor.spawnProcess(
                out, path, [hook.command] + hook.args, env=os.environ,
                childFDs={0: "w", 1: "r", 2: "r"})
        except OSError as e:
            logger.error("", "on-%s: %s" % (hook.id, e))
            return defer.succeed(None)
        out.done.addCallback(self._ended, hook)
        if hook.background:
            return defer.succeed(None)
        return out.done

    @staticmethod
    def _ended(status, hook):
        code = getattr(status, "exitCode", 0)
        if code:
            logger.error("", "on-%s: exit status %s" % (hook.id, code))

    @defer.inlineCallbacks
    def fire(self, event):
        """Run the hooks of ``event`` in Corefile order."""
        for hook in self.hooks:
            if hook.event == event:
                yield self.run(hook)

    def start(self):
        return self.fire("startup")

    def stop(self):
        server = self.block.server
        if server.running or self.shut_down:
            return None         # a reload retires this configuration
        self.shut_down = True
        return self.fire("shutdown")


def parse(d):
    """One ``on`` line as a Hook (CoreDNS's messages)."""
    event = d.between(1)[0].lower()
    if event not in EVENTS:
        raise d.error("Wrong event name or event not supported: '%s'"
                      % d.args[0])
    line = " ".join(d.args[1:])
    try:
        parts = shlex.split(line)
    except ValueError as e:
        raise d.error("error parsing command: %s" % e) from e
    if not parts:
        raise d.error("no command contained in '%s'" % line)
    return Hook(event, parts[0], parts[1:])


def setup(d, block):
    if d.children:
        raise d.error("unknown property '%s'" % d.children[0].name)
    hook = parse(d)
    existing = block.plugin("on")
    if existing is not None:
        existing.hooks.append(hook)
        return None
    on = On()
    on.hooks.append(hook)
    return on
