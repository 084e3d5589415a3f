# The host.toml values the module renders for a host whose users run jig
# (`plain`) and for a server with a database and retention (`server`, with TLS), for check.sh to
# write out as TOML and hand to the real `jig config check`.
{ nixpkgsLib }:
let
  system = import ./system.nix { inherit nixpkgsLib; };
  hosts = import ./hosts.nix system;
in
{
  plain = system.hostToml (hosts.userWith { });
  server = system.hostToml (
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
  );
}
