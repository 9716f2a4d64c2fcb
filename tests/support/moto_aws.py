"""moto's standalone AWS emulator (a real HTTP server speaking the AWS
APIs) for the route53 tests: started on 127.0.0.1 in a thread, with
helpers to create hosted zones and record sets through boto3."""

import logging

#: Keys moto accepts (it checks none); never real credentials.
KEY_ID = "testing-key-id"
SECRET = "testing-secret"


class MotoServer:
    """``srv = MotoServer(); srv.start()``; ``srv.url``; ``srv.stop()``."""

    def __init__(self, port=0):
        self.port = port
        self.server = None
        self.url = None

    def start(self):
        from moto.server import ThreadedMotoServer
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self.server = ThreadedMotoServer(ip_address="127.0.0.1",
                                         port=self.port, verbose=False)
        self.server.start()
        host, self.port = self.server.get_host_and_port()
        self.url = "http://%s:%d" % (host, self.port)
        return self

    def stop(self):
        if self.server is not None:
            self.server.stop()
            self.server = None

    def client(self):
        import boto3
        return boto3.client("route53", endpoint_url=self.url,
                            region_name="us-east-1",
                            aws_access_key_id=KEY_ID,
                            aws_secret_access_key=SECRET)

    def zone(self, name, records=(), soa=None):
        """A new hosted zone ``name`` holding ``records`` (lines "NAME TTL
        TYPE VALUE..."); its id.  moto's own SOA value does not parse, so
        the zone's SOA is replaced with ``soa`` (a default when None)."""
        c = self.client()
        out = c.create_hosted_zone(Name=name, CallerReference=name + str(
            id(records)) + str(len(c.list_hosted_zones()["HostedZones"])))
        zone_id = out["HostedZone"]["Id"].split("/")[-1]
        soa = soa or ("ns-1536.awsdns-00.co.uk. awsdns-hostmaster.amazon."
                      "com. 1 7200 900 1209600 86400")
        self.upsert(zone_id, ["%s 300 SOA %s" % (name, soa)])
        if records:
            self.upsert(zone_id, records)
        return zone_id

    def upsert(self, zone_id, records, action="UPSERT"):
        """Create or replace record sets (lines "NAME TTL TYPE VALUE");
        lines of the same name and type form one set."""
        sets = {}
        for line in records:
            name, ttl, rtype, value = line.split(None, 3)
            s = sets.setdefault((name, rtype), {
                "Name": name, "Type": rtype, "TTL": int(ttl),
                "ResourceRecords": []})
            s["ResourceRecords"].append({"Value": value})
        changes = [{"Action": action, "ResourceRecordSet": s}
                   for s in sets.values()]
        self.client().change_resource_record_sets(
            HostedZoneId=zone_id, ChangeBatch={"Changes": changes})
