"""The route53 plugin: hosted zones listed with boto3 in a thread (the SDK
blocks), served through engines.hosted."""

import os

from twisted.internet import threads

from corednstw.core import logger
from corednstw.engines.hosted import HostedZones, rr_from_text

from .names import unescape

DEFAULT_REFRESH = 60.0

#: Route 53's page size limit for ListResourceRecordSets.
PAGE_SIZE = "1000"


class Options:
    """How the AWS client is made: static keys (deprecated), a profile and
    its shared credentials file, another endpoint."""

    key_id = None
    secret = None
    profile = None
    credentials_file = None
    endpoint = None


class Route53(HostedZones):
    name = "route53"

    def __init__(self, hosted, opts, refresh=DEFAULT_REFRESH, fall=None):
        HostedZones.__init__(self, hosted, refresh, fall)
        self.opts = opts
        self._client = None

    def fetch(self, hz):
        pool = self.reactor.getThreadPool()
        return threads.deferToThreadPool(self.reactor, pool,
                                         self._list, hz.ref)

    # -- in a thread ------------------------------------------------------

    def _list(self, zone_id):
        """Every record of the hosted zone, page after page."""
        client = self._get_client()
        args = {"HostedZoneId": zone_id, "MaxItems": PAGE_SIZE}
        rrs = []
        while True:
            out = client.list_resource_record_sets(**args)
            for rrs_set in out.get("ResourceRecordSets", ()):
                rrs.extend(_records(rrs_set, self.name))
            if not out.get("IsTruncated"):
                return rrs
            args["StartRecordName"] = out["NextRecordName"]
            args["StartRecordType"] = out["NextRecordType"]
            if out.get("NextRecordIdentifier"):
                args["StartRecordIdentifier"] = out["NextRecordIdentifier"]

    def _get_client(self):
        """The boto3 client, made on first use (it reads files)."""
        if self._client is None:
            self._client = make_client(self.opts)
        return self._client


def make_client(opts):
    """A Route 53 client following the SDK's credential chain, with the
    Corefile's keys, profile, credentials file and endpoint on top."""
    import boto3
    import botocore.session

    core = botocore.session.Session(profile=opts.profile)
    if opts.credentials_file:
        core.set_config_variable("credentials_file",
                                 os.path.expanduser(opts.credentials_file))
    session = boto3.session.Session(botocore_session=core)
    kw = {"region_name": session.region_name or "us-east-1"}
    if opts.key_id is not None:
        kw["aws_access_key_id"] = opts.key_id
        kw["aws_secret_access_key"] = opts.secret
    if opts.endpoint:
        kw["endpoint_url"] = opts.endpoint
    return session.client("route53", **kw)


def _records(rrs_set, plugin):
    """The RRs of one record set as CoreDNS reads it: names and values
    unescaped, one record per value; alias sets (no values) give none.
    A set that does not parse is logged and skipped."""
    out = []
    for value in rrs_set.get("ResourceRecords", ()):
        try:
            name = _unescape(rrs_set["Name"], "name")
            text = _unescape(value.get("Value", ""), "value")
            out.append(rr_from_text(name, rrs_set["Type"],
                                    rrs_set.get("TTL", 0), text))
        except ValueError as e:
            logger.warning(plugin, "Failed to process resource record set: "
                           "%s" % e)
    return out


def _unescape(s, what):
    try:
        return unescape(s)
    except ValueError as e:
        raise ValueError("failed to unescape `%s' %s: %s" % (s, what,
                                                              e)) from e
