# The hosts the checks evaluate: services.jig configurations for a machine
# whose users run jig, a server with every option set, and workers against
# PostgreSQL. `system` is ./system.nix.
system:
let
  inherit (system) lib jig;
  store = builtins.storeDir;
in
rec {
  users = {
    users.users.alice = {
      isNormalUser = true;
      group = "staff";
    };
    users.users.bob.isNormalUser = true;
    users.groups.staff = { };
  };

  settings = {
    runtimes = {
      python = "/opt/py/bin/python3";
      node = null;
      bun = null;
      deno = null;
    };
    containment.bwrap = "/opt/bw/bin/bwrap";
    providers = [
      {
        name = "kv";
        kind = "wasm";
        path = "/opt/kv/kv.wasm";
        settings.namespace = "demo";
        secrets.token = "/var/keys/kv-token";
      }
      {
        name = "checkpoint";
        kind = "builtin";
      }
    ];
  };
  userProjects = {
    intake = {
      path = "/srv/jig/intake";
      user = "alice";
    };
    notes = {
      path = "/srv/jig/notes";
      user = "bob";
    };
  };

  # A host whose users run jig in their own projects.
  userCfg = {
    enable = true;
    inherit settings;
    agent = {
      api = "chat-completions";
      model = "some-model";
      apiKeyFile = "/var/keys/alice-agent";
    };
    projects = userProjects;
  };
  userWith = cfg: jig (lib.recursiveUpdate userCfg cfg) [ users ];

  # The server with every option set: two served projects (one admitted,
  # one copied only), the Agent, a secret and TCP with a token.
  greeterSrc = "${store}/00000000000000000000000000000000-greeter-src";
  serverCfg = {
    enable = true;
    inherit settings;
    projects = userProjects // {
      greeter.source = greeterSrc;
      drafts = {
        source = "${store}/00000000000000000000000000000000-drafts-src";
        admit = false;
      };
    };
    server = {
      enable = true;
      maxActiveRuns = 4;
      maxQueuedRuns = 64;
      envelopesAhead = 4;
      shutdownGrace = "2m";
      maxConnections = 512;
      headerTimeout = "5s";
      bodyTimeout = "2m";
      tcp = "127.0.0.1:8480";
      tokenFile = "/var/keys/jig-token";
    };
    agent = {
      api = "chat-completions";
      baseUrl = "http://127.0.0.1:8080/v1";
      model = "some-model";
      apiKeyFile = "/var/keys/jig-agent";
    };
    secrets.deploy = "/var/keys/deploy";
  };
  serverWith = cfg: jig (lib.recursiveUpdate serverCfg cfg) [ users ];

  # Two workers against one PostgreSQL with a password credential.
  database = {
    url = "postgresql:///jig?host=/run/postgresql&user=jig";
    passwordFile = "/var/keys/jig-db";
  };
  workerCfg = userCfg // {
    worker = {
      count = 2;
      concurrency = 3;
      inherit database;
    };
  };
  workerWith = cfg: jig (lib.recursiveUpdate workerCfg cfg) [ users ];
}
