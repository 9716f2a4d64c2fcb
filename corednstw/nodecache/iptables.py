"""node-cache's iptables rules: DNS to and from the local address skips
connection tracking (raw table NOTRACK) and is accepted (filter table), so
a node's conntrack table neither fills with DNS flows nor races on them.

The rules, their order and their comments are node-cache's, so rules one
binary installed are found (and removed) by the other.  Every rule is put
first in its chain, checked with ``-C`` before, as k8s.io's iptables
helper does with EnsureRule(Prepend).
"""

import dataclasses
import shutil
import subprocess

SKIP_CONNTRACK = "NodeLocal DNS Cache: skip conntrack"
ALLOW_TRAFFIC = "NodeLocal DNS Cache: allow DNS traffic"

#: Seconds iptables waits for the xtables lock kube-proxy also takes.
LOCK_WAIT = "5"


class IPTablesError(Exception):
    """An iptables command failed for a reason other than "no such rule";
    ``locked`` when another process held the xtables lock."""

    def __init__(self, text):
        Exception.__init__(self, text)
        self.locked = "holding the xtables lock" in text


@dataclasses.dataclass(frozen=True)
class Rule:
    table: str
    chain: str
    args: tuple

    def __str__(self):
        return "{%s %s %s}" % (self.table, self.chain, list(self.args))


def _rule(table, chain, proto, direction, ip, port, target):
    comment = SKIP_CONNTRACK if target == "NOTRACK" else ALLOW_TRAFFIC
    addr, port_opt = ("-d", "--dport") if direction == "to" \
        else ("-s", "--sport")
    return Rule(table, chain, ("-p", proto, addr, ip, port_opt, port,
                               "-j", target, "-m", "comment",
                               "--comment", comment))


def rules(local_ips, port, health_port):
    """Every rule for each local address, in node-cache's order."""
    out = []
    for ip in local_ips:
        for table, chain, direction, target in (
                ("raw", "PREROUTING", "to", "NOTRACK"),
                ("filter", "INPUT", "to", "ACCEPT"),
                ("raw", "OUTPUT", "from", "NOTRACK"),
                ("filter", "OUTPUT", "from", "ACCEPT"),
                ("raw", "OUTPUT", "to", "NOTRACK")):
            for proto in ("tcp", "udp"):
                out.append(_rule(table, chain, proto, direction, ip, port,
                                 target))
        # The liveness probe's requests to health (TCP only).
        out.append(_rule("raw", "OUTPUT", "tcp", "to", ip, health_port,
                         "NOTRACK"))
        out.append(_rule("raw", "OUTPUT", "tcp", "from", ip, health_port,
                         "NOTRACK"))
    return out


def _count_rules(save):
    try:
        out = subprocess.run([save], capture_output=True, text=True,
                             check=False).stdout
    except OSError:
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("-"))


def mode():
    """"-legacy", "-nft" or "": the backend the node's rules already use
    (kube-proxy's), as node-cache's image decides with iptables-wrapper:
    rules must go where the kernel path they belong to reads them."""
    if not (shutil.which("iptables-legacy-save")
            and shutil.which("iptables-nft-save")):
        return ""
    legacy, nft = (_count_rules("iptables-%s-save" % m)
                   + _count_rules("ip6tables-%s-save" % m)
                   for m in ("legacy", "nft"))
    return "-legacy" if legacy > nft else "-nft"


class IPTables:
    """iptables (or ip6tables) run as a command: no library speaks the
    kernel's nftables/xtables interface better than the tool itself."""

    def __init__(self, ipv6=False):
        self.command = ("ip6tables" if ipv6 else "iptables") + mode()

    def _run(self, op, rule):
        return subprocess.run(
            [self.command, "-w", LOCK_WAIT, "-t", rule.table, op,
             rule.chain, *rule.args],
            capture_output=True, text=True, check=False)

    def exists(self, rule):
        r = self._run("-C", rule)
        if r.returncode == 0:
            return True
        # 1: no such rule (iptables's "Bad rule (does a matching rule
        # exist in that chain?)"); 2 is a usage error, 4 the lock.
        if r.returncode == 1 and "xtables lock" not in r.stderr:
            return False
        raise IPTablesError(r.stderr.strip() or "exit status %d"
                            % r.returncode)

    def ensure(self, rule):
        """Put ``rule`` first in its chain unless it is there; whether it
        already was."""
        if self.exists(rule):
            return True
        r = self._run("-I", rule)
        if r.returncode != 0:
            raise IPTablesError(r.stderr.strip())
        return False

    def delete(self, rule):
        """Remove every copy of ``rule`` (it may have been added twice)."""
        while self.exists(rule):
            r = self._run("-D", rule)
            if r.returncode != 0:
                raise IPTablesError(r.stderr.strip())
