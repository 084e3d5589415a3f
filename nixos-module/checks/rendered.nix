# The host.toml values the module renders for a user-only host (`plain`),
# a server (`server`) and an admission unit (`admit`), for check.sh to write
# out as TOML and hand to the real `jig config check`.
let
  stubs = import ./stubs.nix;
  jigLib = import ../lib.nix;
  render =
    cfg:
    (import ../default.nix {
      config = {
        services.jig = cfg;
        users.users.alice.group = "users";
      };
      inherit (stubs) lib;
      pkgs = stubs.pkgs "x86_64-linux";
    }).config.content.environment.etc."jig/host.toml".source.passthru.toml.value;

  settings = {
    runtimes = {
      python = "/opt/py/bin/python3";
      node = null;
      bun = null;
      deno = null;
    };
    containment.bwrap = "/opt/bw/bin/bwrap";
    agent = null;
    providers = [
      {
        name = "kv";
        kind = "wasm";
        path = "/opt/kv/kv.wasm";
        settings.namespace = "demo";
        secrets.token = "/var/keys/kv-token";
      }
    ];
  };
  plain = {
    enable = true;
    package = stubs.fakeDrv "jig";
    bubblewrapPackage = stubs.fakeDrv "bubblewrap" // {
      version = "0.12.0";
    };
    inherit settings;
    projects.intake = {
      path = "/srv/jig/intake";
      user = "alice";
      group = null;
      source = null;
      admit = true;
    };
    server = {
      enable = false;
      maxActiveRuns = null;
      maxQueuedRuns = null;
      shutdownGrace = "30s";
      tcp = null;
      tokenFile = null;
    };
    agent = {
      api = "chat-completions";
      baseUrl = "http://127.0.0.1:8080/v1";
      model = "some-model";
      apiKeyFile = "/var/keys/jig-agent";
    };
    secrets.deploy = "/var/keys/deploy";
  };
  server = plain // {
    server = plain.server // {
      enable = true;
      maxActiveRuns = 4;
      maxQueuedRuns = 64;
      shutdownGrace = "2m";
      tcp = "127.0.0.1:8480";
      tokenFile = "/var/keys/jig-token";
      database = {
        url = "postgresql:///jig?host=/run/postgresql&user=jig";
        passwordFile = "/var/keys/jig-db";
      };
    };
    projects = plain.projects // {
      greeter = {
        path = "${jigLib.projectsDir}/greeter";
        user = jigLib.serverUser;
        group = null;
        source = "/nix/store/00000000000000000000000000000000-greeter-src";
        admit = true;
      };
    };
  };
in
{
  plain = render plain;
  server = render server;
}
