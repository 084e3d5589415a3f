# NixOS module `services.jig`: installs the jig FLOW host, writes its host
# configuration to /etc/jig/host.toml, and prepares the kernel and systemd
# features its rootless containment needs (user namespaces, cgroup v2
# delegation to user managers, nix-ld for the real glibc loader).
#
# Without `server.enable` it runs no daemon: jig is a command users run in
# their own projects. With it, `jig serve` runs as the `jig` system user behind
# jig.socket, serving the projects declared with a `source`, each copied into
# the state directory and admitted by its own oneshot unit.
{
  config,
  lib,
  pkgs,
  ...
}:
let
  cfg = config.services.jig;
  jigLib = import ./lib.nix;
  tomlFormat = pkgs.formats.toml { };

  inherit (lib)
    literalExpression
    mkEnableOption
    mkIf
    mkOption
    types
    ;

  secretFile = types.addCheck types.str jigLib.isSecretFile // {
    description = "absolute path to a file outside the Nix store";
  };

  # A file handed to the server with LoadCredential=. A string, never a Nix
  # path (which would be copied into the world-readable store), and never a
  # store path: the type refuses both, naming the option.
  credentialFile = types.addCheck types.str jigLib.isSecretFile // {
    description = "absolute path to a file outside the Nix store, handed over with LoadCredential";
  };

  baseUrl = types.addCheck types.str jigLib.isBaseUrl // {
    description = "https URL (or http to a loopback host) without userinfo, query or fragment, at most ${toString jigLib.maxBaseUrlLength} characters";
  };

  modelName = types.addCheck types.str jigLib.isModel // {
    description = "model name matching `${jigLib.modelPattern}`";
  };

  positive = types.addCheck types.int jigLib.isPositiveInt // {
    description = "positive integer";
  };

  executable =
    description: default: defaultText:
    mkOption {
      type = types.nullOr types.path;
      inherit default description;
      defaultText = literalExpression defaultText;
    };

  runtimesModule = {
    freeformType = types.attrsOf (types.nullOr types.path);
    options = {
      python =
        executable "Python 3 interpreter for `flow.py` packages; null leaves Python unavailable."
          "${pkgs.python3}/bin/python3"
          ''"''${pkgs.python3}/bin/python3"'';
      node =
        executable "Node.js for `flow.js`/`flow.ts` packages; null leaves it unavailable."
          "${pkgs.nodejs}/bin/node"
          ''"''${pkgs.nodejs}/bin/node"'';
      bun =
        executable "Bun for `flow.ts` packages; null leaves it unavailable."
          "${pkgs.bun}/bin/bun"
          ''"''${pkgs.bun}/bin/bun"'';
      deno =
        executable "Deno for `flow.ts` packages; null leaves it unavailable."
          "${pkgs.deno}/bin/deno"
          ''"''${pkgs.deno}/bin/deno"'';
    };
  };

  containmentModule = {
    freeformType = tomlFormat.type;
    options.bwrap = mkOption {
      type = types.path;
      default = "${cfg.bubblewrapPackage}/bin/bwrap";
      defaultText = literalExpression ''"''${config.services.jig.bubblewrapPackage}/bin/bwrap"'';
      description = ''
        Absolute path of the Bubblewrap executable used for containment.
        `JIG_BWRAP_PATH` in a caller's environment still overrides it.
      '';
    };
  };

  agentModule = {
    options = {
      api = mkOption {
        type = types.enum jigLib.agentApis;
        default = "responses";
        description = "Wire shape of the OpenAI-compatible endpoint.";
      };
      base-url = mkOption {
        type = types.nullOr baseUrl;
        default = null;
        example = "https://api.example.org/v1";
        description = "Endpoint base URL; null uses the host's default endpoint.";
      };
      model = mkOption {
        type = modelName;
        example = "some-model";
        description = "Model name. There is no default model.";
      };
      api-key-file = mkOption {
        type = secretFile;
        example = "/run/credentials/jig/agent-key";
        description = ''
          File holding the API key. Only the path is written to host.toml;
          the key never enters the Nix store.
        '';
      };
    };
  };

  providerModule = {
    options = {
      name = mkOption {
        type = types.nonEmptyStr;
        description = "Provider name, unique within `providers`.";
      };
      kind = mkOption {
        type = types.enum jigLib.providerKinds;
        description = "How the provider is loaded.";
      };
      path = mkOption {
        type = types.nullOr types.path;
        default = null;
        description = "The `.wasm` component or native library; required for `wasm` and `native`, absent for `builtin`.";
      };
      settings = mkOption {
        type = tomlFormat.type;
        default = { };
        example = {
          namespace = "demo";
        };
        description = "Provider settings, passed to the provider as JSON.";
      };
      secrets = mkOption {
        type = types.attrsOf secretFile;
        default = { };
        example = {
          token = "/run/credentials/jig/kv-token";
        };
        description = "Secret name -> file holding it. Only paths are written to host.toml.";
      };
    };
  };

  # The server's Agent endpoint: the key reaches jig.service as a credential.
  serverAgentModule = {
    options = {
      api = mkOption {
        type = types.enum jigLib.agentApis;
        default = "responses";
        description = "Wire shape of the OpenAI-compatible endpoint.";
      };
      baseUrl = mkOption {
        type = types.nullOr baseUrl;
        default = null;
        example = "https://api.example.org/v1";
        description = "Endpoint base URL; null uses the host's default endpoint.";
      };
      model = mkOption {
        type = modelName;
        example = "some-model";
        description = "Model name. There is no default model.";
      };
      apiKeyFile = mkOption {
        type = credentialFile;
        example = "/var/keys/jig-agent";
        description = ''
          File holding the API key, read by systemd (as root) and handed to
          the jig units with `LoadCredential=`; host.toml names only the
          credential's path (`$CREDENTIALS_DIRECTORY/${jigLib.agentKeyCredential}`).
        '';
      };
    };
  };

  # Where the Run queue's PostgreSQL is (docs/src/serving.md). High availability is
  # the operator's choice: a replicated PostgreSQL (services.postgresql
  # here, or a managed one) behind this one URL.
  databaseModule = {
    options = {
      url = mkOption {
        type = types.addCheck types.str jigLib.isDatabaseUrl // {
          description = "postgresql:// URL without a password";
        };
        example = "postgresql:///jig?host=/run/postgresql&user=jig";
        description = "The PostgreSQL URL (`[database] url`), without a password.";
      };
      passwordFile = mkOption {
        type = types.nullOr credentialFile;
        default = null;
        example = "/var/keys/jig-database";
        description = "The database password, handed over with LoadCredential (`[database] password-file` names the credential); null for peer or trust authentication.";
      };
    };
  };

  retentionDuration = types.addCheck types.str jigLib.isRetentionDuration // {
    description = "duration matching `${jigLib.retentionDurationPattern}`, at most 3650d";
  };

  # `[retention]` (docs/src/runs.md): what `jig serve` lets go of settled Runs and
  # delivered packets; `jig gc` applies the same by hand.
  retentionModule = {
    options = {
      maxAge = mkOption {
        type = types.nullOr retentionDuration;
        default = null;
        example = "30d";
        description = "Settled Runs older than this (since they settled) are removed with their checkpoints and packets (`[retention] max-age`).";
      };
      maxRuns = mkOption {
        type = types.nullOr positive;
        default = null;
        example = 10000;
        description = "At most this many settled Runs are kept per project, newest first (`[retention] max-runs`); with `maxAge` both apply.";
      };
      packetsMaxAge = mkOption {
        type = types.nullOr retentionDuration;
        default = null;
        description = "Delivered packets older than this are removed (`[retention] packets-max-age`); null: `maxAge`.";
      };
      keyWindow = mkOption {
        type = types.nullOr retentionDuration;
        default = null;
        description = "A Run with an idempotency key is kept at least this long after it settled, so its key replays it (`[retention] key-window`); null: jig's default, 24h. Afterwards the same key makes a new Run.";
      };
      interval = mkOption {
        type = types.nullOr retentionDuration;
        default = null;
        description = "How often `jig serve` sweeps (`[retention] interval`); null: jig's default, 5m.";
      };
    };
  };

  projectModule =
    { name, config, ... }:
    {
      options = {
        path = mkOption {
          type = types.addCheck types.str jigLib.isProjectPath // {
            description = "absolute path without whitespace, `.` or `..` components";
          };
          default =
            if config.source != null then
              "${jigLib.projectsDir}/${name}"
            else
              throw "services.jig.projects.${name}.path: set it, or set `source` to serve the project from ${jigLib.projectsDir}/${name}";
          defaultText = literalExpression ''"${jigLib.projectsDir}/<name>" when `source` is set'';
          example = "/srv/jig/intake";
          description = "Project root directory.";
        };
        user = mkOption {
          type = types.str;
          default =
            if config.source != null then
              jigLib.serverUser
            else
              throw "services.jig.projects.${name}.user: set the user who owns the project";
          defaultText = literalExpression ''"${jigLib.serverUser}" when `source` is set'';
          description = "User who owns the project and runs jig in it (`${jigLib.serverUser}` for a served project).";
        };
        source = mkOption {
          type = types.nullOr types.path;
          default = null;
          example = literalExpression "./my-project";
          description = ''
            The project's files (a flake input, `./my-project`). When set, the
            project is served by `jig serve`: the oneshot unit
            `jig-admit-<name>.service`, ordered before jig.service and re-run
            whenever the source changes, copies it into `path` (keeping the
            protected state `${jigLib.stateDirName}/`) and runs
            `jig review --yes`. Requires `services.jig.server.enable`; the name
            must be a LocalName.
          '';
        };
        admit = mkOption {
          type = types.bool;
          default = true;
          description = ''
            Review and admit the copied source. A failed review fails the
            admission unit (the diagnostic is in its journal) and the
            previously admitted generation keeps serving. false copies only;
            the operator admits by hand.
          '';
        };
        group = mkOption {
          type = types.nullOr types.str;
          default = null;
          description = "Group of the project directories; null uses the user's primary group.";
        };
      };
    };

  server = if cfg.server.enable then cfg.server else null;

  # Projects with a source are served; their names are `[[projects]] name`.
  servedProjects = lib.filterAttrs (_: p: p.source != null) cfg.projects;
  servedPaths = builtins.mapAttrs (_: p: p.path) servedProjects;

  # The host.toml a unit reads: `credentials` is where that unit finds its
  # credentials (null: the operator's files themselves, for a shell user).
  hostTomlValue =
    credentials:
    jigLib.hostToml cfg.settings
    // jigLib.serverTables {
      inherit credentials server;
      inherit (cfg) agent secrets;
      projects = servedPaths;
    }
    // jigLib.retentionTable cfg.retention;

  # Rendered, then checked by `jig config check` at build time, so a bad
  # configuration fails the build rather than the service.
  checkedToml =
    name: value:
    let
      toml = tomlFormat.generate name value;
    in
    pkgs.runCommand name { passthru = { inherit toml; }; } ''
      ${cfg.package}/bin/jig config check ${toml}
      cp ${toml} $out
    '';

  serverUnit = "jig.service";
  workerUnit = i: "jig-worker-${toString i}.service";
  workerNumbers = builtins.genList (i: i + 1) cfg.worker.count;
  workerToml =
    i:
    checkedToml "jig-host-worker-${toString i}.toml" (
      jigLib.hostToml cfg.settings
      // {
        database = jigLib.databaseTable (jigLib.credentialsDir (workerUnit i)) cfg.worker.database;
      }
    );
  admitUnit = name: "jig-admit-${name}.service";

  hostToml = checkedToml "jig-host.toml" (
    hostTomlValue (if server == null then null else jigLib.credentialsDir serverUnit)
  );
  serveToml = hostToml;
  admitToml = name: checkedToml "jig-host-admit-${name}.toml" (hostTomlValue (jigLib.credentialsDir (admitUnit name)));

  credentials = jigLib.loadCredentials {
    inherit server;
    inherit (cfg) agent secrets;
  };

  # Hardening shared by jig.service and the admission units (review prepares
  # dependencies in the same containment). Each relaxation says why.
  hardening = {
    User = jigLib.serverUser;
    Group = jigLib.serverGroup;
    StateDirectory = jigLib.stateDirectory;
    StateDirectoryMode = "0750";
    WorkingDirectory = jigLib.stateDir;
    UMask = "0077";
    NoNewPrivileges = true;
    # An unprivileged user namespace starts with a full capability set of its
    # own, so bubblewrap needs none from the host.
    CapabilityBoundingSet = "";
    AmbientCapabilities = "";
    ProtectSystem = "strict";
    ProtectHome = true;
    PrivateTmp = true;
    PrivateDevices = true;
    PrivateIPC = true;
    # Relaxed: ProtectHostname= is a seccomp filter that makes sethostname()
    # fail with EPERM for the unit and everything it starts, and bubblewrap
    # names each sandbox (--hostname) inside its own UTS namespace; no
    # SystemCallFilter= can lift a second filter. The host's hostname stays
    # unchanged either way: the sandbox's UTS namespace is its own.
    ProtectHostname = false;
    ProtectClock = true;
    ProtectKernelModules = true;
    ProtectKernelLogs = true;
    LockPersonality = true;
    RestrictRealtime = true;
    RestrictSUIDSGID = true;
    RemoveIPC = true;
    SystemCallArchitectures = "native";
    # Relaxed: bubblewrap enters user, mount, PID, IPC, UTS, cgroup and
    # network namespaces for every contained process.
    RestrictNamespaces = false;
    # Relaxed: a private user namespace for the service would leave the
    # delegated cgroup and the state directory owned by an unmapped user.
    PrivateUsers = false;
    # Relaxed: bubblewrap mounts a fresh procfs in each sandbox, which the
    # kernel allows only while the inherited /proc is fully visible; the
    # read-only overmounts of ProtectKernelTunables= (/proc/sys, /proc/bus,
    # ...), a hidepid ProtectProc= and ProcSubset=pid each make it not.
    ProtectKernelTunables = false;
    ProtectProc = "default";
    ProcSubset = "all";
    # Relaxed: jig creates each Run's cgroup inside the delegated subtree,
    # and ProtectControlGroups= mounts /sys/fs/cgroup read-only.
    ProtectControlGroups = false;
    # Relaxed: wasmtime, Bun, Node and Deno compile code at run time, which
    # needs writable-then-executable memory.
    MemoryDenyWriteExecute = false;
    # AF_NETLINK: bubblewrap brings up the loopback interface of each new
    # network namespace over rtnetlink. AF_INET/AF_INET6: the Agent endpoint,
    # the npm registry and the optional TCP listener.
    RestrictAddressFamilies = [
      "AF_UNIX"
      "AF_INET"
      "AF_INET6"
      "AF_NETLINK"
    ];
    # Relaxed beyond @system-service: @mount (bubblewrap's mount, pivot_root,
    # umount2), sethostname (its --hostname), seccomp (the envelope's own
    # system-call filter, installed by bubblewrap).
    SystemCallFilter = [
      "@system-service"
      "@mount"
      "sethostname"
      "seccomp"
    ];
    SystemCallErrorNumber = "EPERM";
    LoadCredential = credentials;
  };

  # jig.service and one admission unit per served project.
  serverServices = {
    jig = {
      description = "jig FLOW host (jig serve)";
      requires = [ "jig.socket" ];
      after = [
        "jig.socket"
        "network-online.target"
      ];
      wants = [ "network-online.target" ];
      wantedBy = [ "multi-user.target" ];
      serviceConfig = hardening // {
        Type = "exec";
        # fd 3 is jig.socket (LISTEN_FDS); [[projects]] in host.toml
        # names what it serves. A changed configuration is a changed
        # unit, so a switch restarts it.
        ExecStart = "${cfg.package}/bin/jig serve --config ${serveToml}";
        Environment = [ "HOME=${jigLib.stateDir}" ];
        # Each Run's cgroup is made inside the service's own subtree
        # (jig moves itself into a leaf so the controllers can be
        # enabled for its children).
        Delegate = "cpu memory pids";
        KillMode = "control-group";
        TimeoutStopSec = "${toString (jigLib.durationSeconds server.shutdownGrace + jigLib.stopMarginSeconds)}s";
        Restart = "on-failure";
        # Room for max-connections (256 by default) TCP clients beside the
        # 512 descriptors jig serve keeps for the socket and Runs: it
        # refuses to start when the limit cannot hold both.
        LimitNOFILE = jigLib.descriptorLimit server.maxConnections;
        ReadWritePaths = lib.mapAttrsToList (_: p: p.path) servedProjects;
      };
    };
  }
  // lib.mapAttrs' (
    name: p:
    lib.nameValuePair "jig-admit-${name}" {
      description = "jig: copy and admit project ${name}";
      # Ordered before, not required by, jig.service: a failed review
      # leaves the previously admitted generation serving.
      before = [ "jig.service" ];
      after = [ "network-online.target" ];
      wants = [ "network-online.target" ];
      wantedBy = [
        "jig.service"
        "multi-user.target"
      ];
      # The script names the source's store path, so a changed source is
      # a changed unit, re-run by the switch.
      restartTriggers = [ p.source ];
      serviceConfig = hardening // {
        Type = "oneshot";
        RemainAfterExit = true;
        Environment = [ "HOME=${jigLib.stateDir}" ];
        Delegate = "cpu memory pids";
        ReadWritePaths = [ p.path ];
      };
      script = jigLib.admitScript {
        inherit name;
        inherit (p) source path admit;
        jig = "${cfg.package}/bin/jig";
        config = admitToml name;
      };
    }
  ) servedProjects;

  # `jig worker`s: each claims Runs from the database and executes them in
  # its own envelope, from its own owner-private cache of admitted bytes.
  workerServices = builtins.listToAttrs (
    map (
      i:
      lib.nameValuePair "jig-worker-${toString i}" {
        description = "jig worker ${toString i} (Runs queued in PostgreSQL)";
        after = [
          "network-online.target"
          "postgresql.service"
        ];
        wants = [ "network-online.target" ];
        wantedBy = [ "multi-user.target" ];
        serviceConfig = hardening // {
          Type = "exec";
          ExecStart = "${cfg.package}/bin/jig worker --config ${workerToml i} --concurrency ${toString cfg.worker.concurrency} --cache /var/cache/jig-worker-${toString i}";
          Environment = [ "HOME=${jigLib.stateDir}" ];
          CacheDirectory = "jig-worker-${toString i}";
          CacheDirectoryMode = "0700";
          Delegate = "cpu memory pids";
          KillMode = "control-group";
          Restart = "on-failure";
          LoadCredential =
            if cfg.worker.database.passwordFile == null then
              [ ]
            else
              [ "${jigLib.databaseCredential}:${cfg.worker.database.passwordFile}" ];
        };
      }
    ) workerNumbers
  );

  projectGroup =
    p:
    if p.group != null then
      p.group
    else if p.user == jigLib.serverUser then
      jigLib.serverGroup
    else
      let
        g = config.users.users.${p.user}.group or "";
      in
      if g == "" then "users" else g;

  providerNames = map (p: p.name) cfg.settings.providers;
  projectPaths = lib.mapAttrsToList (_: p: p.path) cfg.projects;
in
{
  options.services.jig = {
    enable = mkEnableOption "the jig FLOW host";

    package = mkOption {
      type = types.package;
      default = pkgs.callPackage ./package.nix { };
      defaultText = literalExpression "pkgs.callPackage ./package.nix { } # jig from this repository, built with the system's nixpkgs";
      description = "The jig package to install.";
    };

    bubblewrapPackage = mkOption {
      type = types.package;
      default = pkgs.bubblewrap;
      defaultText = literalExpression "pkgs.bubblewrap";
      description = "Bubblewrap package installed system-wide and used for `settings.containment.bwrap`.";
    };

    settings = mkOption {
      type = types.submodule {
        freeformType = tomlFormat.type;
        options = {
          runtimes = mkOption {
            type = types.submodule runtimesModule;
            default = { };
            description = "Runtime name -> absolute executable path. A null or absent runtime is unavailable.";
          };
          containment = mkOption {
            type = types.submodule containmentModule;
            default = { };
            description = "Containment executables.";
          };
          agent = mkOption {
            type = types.nullOr (types.submodule agentModule);
            default = null;
            description = "The builtin Agent Run provider's endpoint; null writes no `[agent]` table.";
          };
          providers = mkOption {
            type = types.listOf (types.submodule providerModule);
            default = [ ];
            description = "Capability providers, written as `[[providers]]` tables.";
          };
        };
      };
      default = { };
      description = ''
        Host configuration, written to /etc/jig/host.toml. Keys not declared
        here are passed through unchanged.
      '';
    };

    server = {
      enable = mkEnableOption "the jig server: `jig serve` behind jig.socket (${jigLib.socketPath}) as the `${jigLib.serverUser}` system user";

      maxActiveRuns = mkOption {
        type = types.nullOr positive;
        default = null;
        description = "At most this many active Runs (`[serve] max-active-runs`); null: jig's default, the number of CPUs.";
      };

      maxQueuedRuns = mkOption {
        type = types.nullOr positive;
        default = null;
        description = "At most this many queued Runs (`[serve] max-queued-runs`); past it a submission is refused RESOURCE_EXHAUSTED. null: jig's default.";
      };

      envelopesAhead = mkOption {
        type = types.nullOr types.ints.unsigned;
        default = null;
        description = "For how many recently run targets the next Run's envelope is made ahead and held before its program runs (`[serve] envelopes-ahead`); 0 makes none. null: jig's default (8).";
      };

      maxConnections = mkOption {
        type = types.nullOr positive;
        default = null;
        description = "At most this many TCP connections at once (`[serve] max-connections`); one past it is answered 503 and closed. The Unix socket is counted apart. The unit's LimitNOFILE leaves room for it. null: jig's default (256).";
      };

      headerTimeout = mkOption {
        type = types.nullOr (
          types.addCheck types.str jigLib.isDuration
          // {
            description = "duration matching `${jigLib.durationPattern}`";
          }
        );
        default = null;
        description = "How long a request's head may take, and an idle connection is kept (`[serve] header-timeout`). null: jig's default (10s).";
      };

      bodyTimeout = mkOption {
        type = types.nullOr (
          types.addCheck types.str jigLib.isDuration
          // {
            description = "duration matching `${jigLib.durationPattern}`";
          }
        );
        default = null;
        description = "How long a request's body may take from its head (`[serve] body-timeout`): a file Run's upload must fit it. null: jig's default (60s).";
      };

      shutdownGrace = mkOption {
        type = types.addCheck types.str jigLib.isDuration // {
          description = "duration matching `${jigLib.durationPattern}`";
        };
        default = "30s";
        description = "How long SIGTERM lets Runs finish before they are cancelled (`[serve] shutdown-grace`); the unit's stop timeout is this plus ${toString jigLib.stopMarginSeconds}s.";
      };

      tcp = mkOption {
        type = types.nullOr (
          types.addCheck types.str jigLib.isTcpAddress
          // {
            description = "host:port or [address]:port, port 1-${toString jigLib.maxPort}";
          }
        );
        default = null;
        example = "127.0.0.1:8480";
        description = "Also listen on TCP (`[serve] tcp`), which always requires `tokenFile`. Off loopback (anything but 127.x.y.z, [::1] or localhost) it requires `tlsCertFile` and `tlsKeyFile`, or `insecurePlainHttp`. A port below 1024 is refused: the service holds no capabilities.";
      };

      tlsCertFile = mkOption {
        type = types.nullOr credentialFile;
        default = null;
        example = "/var/lib/acme/jig.example.org/fullchain.pem";
        description = "Serve `tcp` over TLS with this certificate chain (PEM, leaf first; `[serve] tls-cert` names the credential), with `tlsKeyFile`. Handed over with LoadCredential, which systemd reads as root, so `security.acme`'s files work as they are. Credentials are fixed while a unit runs: a renewed certificate is served once jig.service restarts (list it in the certificate's `security.acme.certs.<name>.reloadServices`).";
      };

      tlsKeyFile = mkOption {
        type = types.nullOr credentialFile;
        default = null;
        example = "/var/lib/acme/jig.example.org/key.pem";
        description = "The private key of `tlsCertFile`'s certificate (PEM), handed over with LoadCredential (`[serve] tls-key` names the credential).";
      };

      insecurePlainHttp = mkOption {
        type = types.bool;
        default = false;
        description = "Serve plain HTTP on a `tcp` address off loopback (`[serve] insecure-plain-http`): the bearer token and the console's cookie cross the network in clear. Prefer `tlsCertFile`, or a loopback `tcp` behind a reverse proxy that terminates TLS.";
      };

      tokenFile = mkOption {
        type = types.nullOr credentialFile;
        default = null;
        example = "/var/keys/jig-token";
        description = "The bearer token TCP clients must present, handed over with LoadCredential (`[serve] token-file` names the credential).";
      };

      console = mkOption {
        type = types.bool;
        default = false;
        description = "Serve the web console on the TCP listener too (`[serve] console`); operators sign in with the bearer token from `tokenFile`. Requires `tcp`. Without it the console is still reachable on the Unix socket through `jig console`.";
      };

      database = mkOption {
        type = types.nullOr (types.submodule databaseModule);
        default = null;
        description = "Enqueue Runs in this PostgreSQL for `services.jig.worker`s instead of executing them here (`[database]`).";
      };
    };

    worker = {
      count = mkOption {
        type = types.addCheck types.int (n: n >= 0) // {
          description = "non-negative integer";
        };
        default = 0;
        description = "How many `jig worker` units (jig-worker-1 ... jig-worker-N) run on this machine.";
      };

      concurrency = mkOption {
        type = positive;
        default = 1;
        description = "Runs each worker executes at once (`jig worker --concurrency`).";
      };

      database = mkOption {
        type = types.nullOr (types.submodule databaseModule);
        default = null;
        description = "The PostgreSQL the workers claim Runs from; required when `count` is above 0.";
      };
    };

    agent = mkOption {
      type = types.nullOr (types.submodule serverAgentModule);
      default = null;
      description = ''
        The builtin Agent Run provider's endpoint, with the key handed over as
        a credential; written as `[agent]`. Use this or `settings.agent`, not
        both.
      '';
    };

    secrets = mkOption {
      type = types.attrsOf credentialFile;
      default = { };
      example = {
        deploy-token = "/var/keys/deploy-token";
      };
      description = ''
        Effect secrets of credentialed Project Commands: secret name -> file
        (name matching `${jigLib.secretNamePattern}`). Each file is handed
        to the jig units with `LoadCredential=`, never copied into the store;
        host.toml's `[secrets]` names only the credential paths.
      '';
    };

    retention = mkOption {
      type = types.nullOr (types.submodule retentionModule);
      default = null;
      example = literalExpression ''
        { maxAge = "30d"; maxRuns = 10000; }
      '';
      description = ''
        Retention of settled Runs, their checkpoints and delivered packets,
        written as `[retention]`; `jig serve` applies it periodically and
        `jig gc` by hand. Pending Runs and the store are never removed.
        null: no table, nothing is ever removed.
      '';
    };

    projects = mkOption {
      type = types.attrsOf (types.submodule projectModule);
      default = { };
      example = literalExpression ''
        {
          intake = { path = "/srv/jig/intake"; user = "alice"; };
        }
      '';
      description = ''
        Projects the operator declares. For each, systemd-tmpfiles creates (at
        boot and on every switch) the project root, owned by `user` with mode
        ${jigLib.projectDirMode}, and its protected state directory
        `${jigLib.stateDirName}/`, owned by `user` with mode ${jigLib.stateDirMode},
        and corrects their ownership and mode when they already exist. It does
        nothing else: it neither creates project files nor reviews or admits
        anything; the user runs `jig review` and `jig run` in the project.
      '';
    };
  };

  config = mkIf cfg.enable {
    assertions = [
      {
        assertion = cfg.worker.count == 0 || cfg.worker.database != null;
        message = "services.jig.worker.database: workers need the database URL";
      }
      {
        assertion = jigLib.duplicates providerNames == [ ];
        message = "services.jig.settings.providers: duplicate names ${toString (jigLib.duplicates providerNames)}";
      }
      {
        assertion =
          cfg.retention == null
          || cfg.retention.maxAge != null
          || cfg.retention.maxRuns != null
          || cfg.retention.packetsMaxAge != null;
        message = "services.jig.retention: set maxAge, maxRuns or packetsMaxAge (null removes nothing)";
      }
      {
        assertion = jigLib.duplicates projectPaths == [ ];
        message = "services.jig.projects: more than one project at ${toString (jigLib.duplicates projectPaths)}";
      }
    ]
    ++ map (p: {
      assertion = (p.kind == "builtin") == (p.path == null);
      message = "services.jig.settings.providers: provider `${p.name}` of kind `${p.kind}` ${
        if p.kind == "builtin" then "must not set" else "must set"
      } `path`";
    }) cfg.settings.providers
    ++ lib.mapAttrsToList (name: p: {
      assertion = config.users.users ? ${p.user} || (server != null && p.user == jigLib.serverUser);
      message = "services.jig.projects.${name}.user: no user `${p.user}` in users.users";
    }) cfg.projects
    ++ lib.concatLists (
      lib.mapAttrsToList (name: p: [
        {
          assertion = server != null;
          message = "services.jig.projects.${name}.source: a served project needs services.jig.server.enable";
        }
        {
          assertion = jigLib.isLocalName name;
          message = "services.jig.projects.${name}: a served project's name must be a LocalName (`${jigLib.localNamePattern}`, at most ${toString jigLib.maxLocalNameLength} characters)";
        }
        {
          assertion = p.user == jigLib.serverUser;
          message = "services.jig.projects.${name}.user: a served project belongs to `${jigLib.serverUser}`, not `${p.user}`";
        }
      ]) servedProjects
    )
    ++ [
      {
        assertion = cfg.agent == null || cfg.settings.agent == null;
        message = "services.jig: set services.jig.agent or services.jig.settings.agent, not both";
      }
      {
        assertion = (cfg.server.tcp == null) == (cfg.server.tokenFile == null);
        message = "services.jig.server: `tcp` and `tokenFile` go together (TCP always requires a bearer token)";
      }
      {
        assertion = !cfg.server.console || cfg.server.tcp != null;
        message = "services.jig.server: `console` serves the console on the TCP listener, so it requires `tcp`";
      }
      {
        assertion = (cfg.server.tlsCertFile == null) == (cfg.server.tlsKeyFile == null);
        message = "services.jig.server: `tlsCertFile` and `tlsKeyFile` go together";
      }
      {
        assertion = cfg.server.tlsCertFile == null || cfg.server.tcp != null;
        message = "services.jig.server: `tlsCertFile` and `tlsKeyFile` serve the TCP listener, so they require `tcp`";
      }
      {
        assertion = !(cfg.server.insecurePlainHttp && cfg.server.tlsCertFile != null);
        message = "services.jig.server: `insecurePlainHttp` and `tlsCertFile` contradict each other: set one";
      }
      {
        assertion =
          cfg.server.tcp == null
          || cfg.server.tlsCertFile != null
          || cfg.server.insecurePlainHttp
          || jigLib.isLoopbackTcp cfg.server.tcp;
        message = "services.jig.server: `tcp` ${toString cfg.server.tcp} is not a loopback address, and plain HTTP would carry the bearer token in clear: set `tlsCertFile` and `tlsKeyFile` (security.acme's files work), or listen on loopback behind a reverse proxy that terminates TLS, or set `insecurePlainHttp`";
      }
    ]
    ++ lib.mapAttrsToList (name: _: {
      assertion = jigLib.isSecretName name;
      message = "services.jig.secrets.${name}: the name must match `${jigLib.secretNamePattern}` (a systemd credential ID)";
    }) cfg.secrets;

    warnings =
      lib.optional (lib.versionOlder (lib.getVersion cfg.bubblewrapPackage) jigLib.minBubblewrapVersion)
        "services.jig: Bubblewrap ${lib.getVersion cfg.bubblewrapPackage} is older than ${jigLib.minBubblewrapVersion}, the minimum jig's containment is specified for; set services.jig.bubblewrapPackage to a newer one.";

    environment.etc."jig/host.toml".source = hostToml;

    # Session variables land in both the PAM environment (so the systemd user
    # manager and non-shell sessions see it) and environment.variables.
    environment.sessionVariables.JIG_CONFIG = "/etc/jig/host.toml";

    # /run/current-system/sw/bin/bwrap is also one of jig's default lookup paths.
    environment.systemPackages = [
      cfg.package
      cfg.bubblewrapPackage
    ];

    # Containment enters user, mount, PID, IPC, UTS, cgroup and network
    # namespaces as an unprivileged user. The hardened profile turns both
    # of these off; jig cannot work without them.
    security.allowUserNamespaces = true;
    security.unprivilegedUsernsClone = true;

    # jig finds the real glibc loader through the system-managed nix-ld link.
    programs.nix-ld.enable = lib.mkDefault true;

    systemd.tmpfiles.settings."10-jig-projects" = mkIf (cfg.projects != { }) (lib.mkMerge (
      lib.optional (servedProjects != { }) {
        ${jigLib.projectsDir}.d = {
          user = jigLib.serverUser;
          group = jigLib.serverGroup;
          mode = jigLib.projectDirMode;
        };
      }
      ++ lib.mapAttrsToList (
        _: p:
        let
          owner = {
            inherit (p) user;
            group = projectGroup p;
          };
        in
        {
          ${p.path}.d = owner // {
            mode = jigLib.projectDirMode;
          };
          "${p.path}/${jigLib.stateDirName}".d = owner // {
            mode = jigLib.stateDirMode;
          };
        }
      ) cfg.projects
    ));

    users.users = mkIf (server != null) {
      ${jigLib.serverUser} = {
        isSystemUser = true;
        group = jigLib.serverGroup;
        home = jigLib.stateDir;
        description = "jig FLOW host server";
      };
    };
    users.groups = mkIf (server != null) { ${jigLib.serverGroup} = { }; };

    # The API socket; members of the `jig` group may submit Runs.
    systemd.sockets.jig = mkIf (server != null) {
      description = "jig FLOW host API socket";
      wantedBy = [ "sockets.target" ];
      listenStreams = [ jigLib.socketPath ];
      socketConfig = {
        SocketUser = jigLib.serverUser;
        SocketGroup = jigLib.serverGroup;
        SocketMode = jigLib.socketMode;
        DirectoryMode = "0755";
      };
    };

    systemd.services = lib.mkMerge [
      {
        # Each Run of a user's jig gets its own cgroup with cpu, memory and
        # pids limits inside a transient scope of the user's systemd manager.
        "user@".serviceConfig.Delegate = "cpu cpuset io memory pids";
      }
      (mkIf (server != null) (serverServices))
      (mkIf (cfg.worker.count > 0) workerServices)
    ];
  };
}
