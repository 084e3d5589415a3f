# The host.toml values the module renders for a host whose users run jig
# (`plain`), for jig.service with a database and retention (`server`, with
# TLS) and for a worker (`worker`), for check.sh to
# write out as TOML and hand to the real `jig config check`.
{ nixpkgsLib }:
let
  system = import ./system.nix { inherit nixpkgsLib; };
  hosts = import ./hosts.nix system;
in
{
  plain = system.hostToml (hosts.userWith { });
  server = system.unitToml (
    hosts.serverWith {
      server.database = hosts.database;
      server.tlsCertFile = "/var/lib/acme/jig.example.org/fullchain.pem";
      server.tlsKeyFile = "/var/lib/acme/jig.example.org/key.pem";
      retention = {
        maxAge = "30d";
        maxRuns = 10000;
        keyWindow = "12h";
      };
    }
  ) "jig.service";
  # A worker's: [agent], secrets and providers' secrets as its credentials.
  worker = system.unitToml (hosts.workerWith { }) "jig-worker-1.service";
}
