# Pure helpers shared by the package, the NixOS module and the offline checks.
#
# This file uses builtins only (never nixpkgs `lib`), so it takes no
# arguments: the package, the module and the checks import it as it is. It
# owns the spec limits that the module enforces on operator input and the
# rendering of host.toml.
let
  inherit (builtins)
    all
    attrNames
    concatStringsSep
    elem
    filter
    foldl'
    head
    isAttrs
    isList
    isString
    length
    listToAttrs
    match
    readFile
    fromTOML
    removeAttrs
    split
    stringLength
    substring
    ;

  startsWith = prefix: s: substring 0 (stringLength prefix) s == prefix;

  splitPath = s: filter isString (split "/" s);

  takeWhile =
    pred: xs:
    let
      go = acc: rest: if rest == [ ] || !(pred (head rest)) then acc else go (acc ++ [ (head rest) ]) (builtins.tail rest);
    in
    go [ ] xs;
in
rec {
  # docs/src/agents.md: OPENAI_MODEL must match this; there is no default model.
  maxModelLength = 256;
  modelPattern = "[A-Za-z0-9][A-Za-z0-9._:/-]{0,${toString (maxModelLength - 1)}}";

  # docs/src/agents.md: the base URL is https, or http to a loopback host (a local
  # inference server), at most 4096 characters, with no userinfo, query or
  # fragment.
  maxBaseUrlLength = 4096;
  baseUrlPattern = "https://[^/?#@[:space:]]+(/[^?#[:space:]]*)?";
  loopbackUrlPattern = "http://(localhost|127\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}|[[]::1[]])(:[0-9]{1,5})?(/[^?#[:space:]]*)?";

  # docs/src/agents.md: the two wire shapes of a direct OpenAI-compatible endpoint.
  agentApis = [
    "responses"
    "chat-completions"
  ];

  # ARCHITECTURE.md "host.toml": how a provider is loaded.
  providerKinds = [
    "wasm"
    "native"
    "builtin"
  ];

  # docs/src/containment.md: containment requires Bubblewrap >= 0.12.
  minBubblewrapVersion = "0.12";

  # Modes for what the module creates for a declared project.
  projectDirMode = "0750";
  stateDirMode = "0700";
  stateDirName = ".jig";

  isModel = s: isString s && match modelPattern s != null;

  isBaseUrl =
    s:
    isString s
    && stringLength s <= maxBaseUrlLength
    && (match baseUrlPattern s != null || match loopbackUrlPattern s != null);

  isAbsolutePath = s: isString s && startsWith "/" s;

  # A secret is referenced by an absolute path outside the Nix store: the store
  # is world-readable, so a key placed there is already disclosed.
  isSecretFile = s: isAbsolutePath s && !(startsWith "${builtins.storeDir}/" s) && s != builtins.storeDir;

  # A project root: absolute, not `/`, no whitespace (tmpfiles lines are
  # whitespace-separated), no empty, `.` or `..` components.
  isProjectPath =
    s:
    let
      parts = builtins.tail (splitPath s);
    in
    isAbsolutePath s
    && s != "/"
    && match ".*[[:space:]].*" s == null
    && all (p: p != "" && p != "." && p != "..") parts;

  # Workspace member directories as written in Cargo.toml. A glob member
  # (`crates/*`) contributes the directory before its first glob component.
  memberDirs =
    cargoToml:
    let
      ws = (fromTOML (readFile cargoToml)).workspace;
      members = ws.members or [ ];
      pathDeps = filter isString (
        map (name: ws.dependencies.${name}.path or null) (attrNames (ws.dependencies or { }))
      );
      dirOf = m: concatStringsSep "/" (takeWhile (p: match ".*[*?[].*" p == null) (splitPath m));
    in
    foldl' (acc: d: if elem d acc || d == "" then acc else acc ++ [ d ]) [ ] (map dirOf (members ++ pathDeps));

  # Remove nulls recursively so the value is representable in TOML, which has
  # no null. Lists keep their length; null list items are dropped.
  dropNulls =
    v:
    if isAttrs v then
      listToAttrs (
        map (n: {
          name = n;
          value = dropNulls v.${n};
        }) (filter (n: v.${n} != null) (attrNames v))
      )
    else if isList v then
      map dropNulls (filter (x: x != null) v)
    else
      v;

  # One `[[providers]]` table: `path` only when set, `settings`/`secrets` only
  # when non-empty.
  renderProvider =
    p:
    let
      empty = n: (p.${n} or null) == { } || (p.${n} or null) == null;
    in
    dropNulls (removeAttrs p (filter empty [ "path" "settings" "secrets" ]));

  # The host.toml value from the module's `settings`: an absent agent is no
  # `[agent]` table, no providers is no `providers` key.
  hostToml =
    settings:
    let
      base = removeAttrs settings [
        "agent"
        "providers"
      ];
      agent = settings.agent or null;
      providers = settings.providers or [ ];
    in
    dropNulls base
    // (if agent == null then { } else { agent = dropNulls agent; })
    // (if providers == [ ] then { } else { providers = map renderProvider providers; });

  # ---- the server (`services.jig.server`) ---------------------------------

  # The system user and group `jig serve` runs as; members of the group may
  # connect to the socket.
  serverUser = "jig";
  serverGroup = "jig";
  # StateDirectory= of jig.service and the admission units, and where a
  # declared project's source is copied.
  stateDirectory = "jig";
  stateDir = "/var/lib/${stateDirectory}";
  projectsDir = "${stateDir}/projects";
  # The Unix socket jig.socket listens on (handed to `jig serve` as fd 3).
  socketPath = "/run/jig/jig.sock";
  socketMode = "0660";

  # Seed 000: a `LocalName` is 1-64 lower-ASCII characters of this form; a
  # served project's name is one (`[[projects]] name`).
  maxLocalNameLength = 64;
  localNamePattern = "[a-z0-9]+(-[a-z0-9]+)*";
  isLocalName = s: isString s && stringLength s <= maxLocalNameLength && match localNamePattern s != null;

  # A secret's name becomes a systemd credential ID (a file name under
  # $CREDENTIALS_DIRECTORY): no `/`, `:` or whitespace; at most 64 characters.
  maxSecretNameLength = 64;
  secretNamePattern = "[A-Za-z0-9_][A-Za-z0-9_.-]{0,${toString (maxSecretNameLength - 1)}}";
  isSecretName = s: isString s && match secretNamePattern s != null;

  # The CLI's duration grammar (`--timeout`): digits and one unit.
  durationPattern = "[0-9]+(ms|s|m|h)";
  isDuration = s: isString s && match durationPattern s != null;

  # `[retention]` durations, by jig's own rule: a positive integer followed
  # by s, m, h or d, up to 3650 days.
  retentionDurationPattern = "[1-9][0-9]*(s|m|h|d)";
  maxRetentionSeconds = 3650 * 86400;
  retentionUnitSeconds = {
    s = 1;
    m = 60;
    h = 3600;
    d = 86400;
  };
  isRetentionDuration =
    s:
    let
      parts = if isString s then match "([1-9][0-9]{0,8})(s|m|h|d)" s else null;
    in
    parts != null
    && builtins.fromJSON (builtins.elemAt parts 0) * retentionUnitSeconds.${builtins.elemAt parts 1}
      <= maxRetentionSeconds;

  # `[retention]` from services.jig.retention (null: no table, nothing is
  # removed).
  retentionTable =
    retention:
    if retention == null then
      { }
    else
      {
        retention = dropNulls {
          max-age = retention.maxAge;
          max-runs = retention.maxRuns;
          packets-max-age = retention.packetsMaxAge;
          key-window = retention.keyWindow;
          interval = retention.interval;
        };
      };

  # jig.service's LimitNOFILE: 65,536, or more where max-connections (jig's
  # default 256 when null) and the 512 descriptors jig serve keeps for the
  # socket and Runs need it, with as many again to spare.
  descriptorLimit =
    maxConnections:
    let
      connections = if maxConnections == null then 256 else maxConnections;
    in
    if connections + 1024 > 65536 then connections + 1024 else 65536;

  # `host:port` or `[v6]:port`, port 1-65535.
  maxPort = 65535;
  isTcpAddress =
    s:
    let
      m = if isString s then match "([[][0-9A-Fa-f:.]+[]]|[A-Za-z0-9.-]+):([0-9]{1,5})" s else null;
      port = if m == null then 0 else digitsToInt (builtins.elemAt m 1);
    in
    m != null && port >= 1 && port <= maxPort;

  # Whether a `[serve] tcp` address is loopback as written: 127.x.y.z,
  # [::1] or localhost. jig serve resolves a name itself and refuses plain
  # HTTP off loopback; here any other name counts as off loopback.
  isLoopbackTcp = s: match "(127[.][0-9.]+|[[]::1[]]|localhost):[0-9]+" s != null;

  # Decimal digits to an integer (leading zeros allowed).
  digitsToInt = d: builtins.fromJSON (builtins.head (match "0*([1-9][0-9]*|0)" d));

  # A duration in whole seconds, rounded up (for TimeoutStopSec=).
  durationSeconds =
    s:
    let
      m = match "([0-9]+)(ms|s|m|h)" s;
      n = digitsToInt (builtins.elemAt m 0);
      unit = builtins.elemAt m 1;
    in
    if unit == "ms" then
      (n + 999) / 1000
    else if unit == "s" then
      n
    else if unit == "m" then
      n * 60
    else
      n * 3600;

  # jig.service's stop timeout beyond the shutdown grace: time to cancel,
  # fence and clean up after the grace ends (seed 002 §11 item 12).
  stopMarginSeconds = 30;

  isPositiveInt = n: builtins.isInt n && n >= 1;

  # Credential IDs (LoadCredential=ID:PATH) and the path a unit sees them at.
  agentKeyCredential = "agent-key";
  tokenCredential = "serve-token";
  tlsCertCredential = "serve-tls-cert";
  tlsKeyCredential = "serve-tls-key";
  databaseCredential = "database-password";

  # A PostgreSQL URL for `[database] url`: no password in it (the password
  # is a credential file), no whitespace.
  isDatabaseUrl =
    u:
    builtins.match "postgres(ql)?://[^[:space:]]*" u != null
    && builtins.match "postgres(ql)?://[^/@:]*:[^/@]*@.*" u == null;

  # `[database]` for a unit reading its password from `credentials`.
  databaseTable =
    credentials: database:
    dropNulls {
      inherit (database) url;
      password-file =
        if database.passwordFile == null then
          null
        else if credentials == null then
          database.passwordFile
        else
          "${credentials}/${databaseCredential}";
    };
  secretCredential = name: "secret-${name}";
  credentialsDir = unit: "/run/credentials/${unit}";

  # The tables the server options add to host.toml. `credentials` is the
  # directory the reading unit finds its credentials in, or null to name the
  # operator's files themselves (no server: jig is run at a shell).
  #   agent:    null or { api, baseUrl, model, apiKeyFile }
  #   secrets:  name -> file
  #   server:   null or { maxActiveRuns, maxQueuedRuns, envelopesAhead, shutdownGrace, tcp, tokenFile,
  #               tlsCertFile, tlsKeyFile, insecurePlainHttp, console }
  #   projects: name -> path of the projects jig serve serves
  serverTables =
    {
      credentials,
      agent,
      secrets,
      server,
      projects,
    }:
    let
      cred = id: file: if credentials == null then file else "${credentials}/${id}";
    in
    (
      if agent == null then
        { }
      else
        {
          agent = dropNulls {
            inherit (agent) api model;
            base-url = agent.baseUrl;
            api-key-file = cred agentKeyCredential agent.apiKeyFile;
          };
        }
    )
    // (
      if secrets == { } then
        { }
      else
        {
          secrets = listToAttrs (
            map (n: {
              name = n;
              value = cred (secretCredential n) secrets.${n};
            }) (attrNames secrets)
          );
        }
    )
    // (
      if server == null then
        { }
      else
        {
          serve = dropNulls {
            socket = socketPath;
            max-active-runs = server.maxActiveRuns;
            max-queued-runs = server.maxQueuedRuns;
            envelopes-ahead = server.envelopesAhead or null;
            shutdown-grace = server.shutdownGrace;
            max-connections = server.maxConnections or null;
            header-timeout = server.headerTimeout or null;
            body-timeout = server.bodyTimeout or null;
            tcp = server.tcp;
            token-file = if server.tokenFile == null then null else cred tokenCredential server.tokenFile;
            tls-cert = if (server.tlsCertFile or null) == null then null else cred tlsCertCredential server.tlsCertFile;
            tls-key = if (server.tlsKeyFile or null) == null then null else cred tlsKeyCredential server.tlsKeyFile;
            insecure-plain-http = if server.insecurePlainHttp or false then true else null;
            console = if server.console or false then true else null;
          };
        }
        // (
          if (server.database or null) == null then
            { }
          else
            { database = databaseTable credentials server.database; }
        )
        // (
          if projects == { } then
            { }
          else
            {
              projects = map (n: {
                name = n;
                path = projects.${n};
              }) (attrNames projects);
            }
        )
    );

  # The admission unit's script: replace the project's files (never its
  # protected state) with the source's, then review and admit. Store files
  # are read-only, so the copy is made writable for the next replacement.
  admitScript =
    {
      name,
      source,
      path,
      admit,
      jig,
      config,
    }:
    ''
      set -euo pipefail
      src='${source}'
      dest='${path}'
      if [ -e "$src/${stateDirName}" ]; then
        echo "jig-admit-${name}: the source carries ${stateDirName}/; protected state belongs to this machine" >&2
        exit 1
      fi
      mkdir -p "$dest"
      find "$dest" -mindepth 1 -maxdepth 1 ! -name '${stateDirName}' -exec rm -rf -- {} +
      cp -rT --no-preserve=mode,ownership,timestamps "$src" "$dest"
      find "$dest" -mindepth 1 -path "$dest/${stateDirName}" -prune -o -exec chmod u+w {} +
    ''
    + (
      if admit then
        ''
          exec ${jig} -C "$dest" --config ${config} review --yes
        ''
      else
        ''
          echo "jig-admit-${name}: copied; admit is false, review it by hand" >&2
        ''
    );

  # LoadCredential= lines for the same files.
  loadCredentials =
    {
      agent,
      secrets,
      server,
    }:
    (if agent == null then [ ] else [ "${agentKeyCredential}:${agent.apiKeyFile}" ])
    ++ map (n: "${secretCredential n}:${secrets.${n}}") (attrNames secrets)
    ++ (
      if server == null || server.tokenFile == null then
        [ ]
      else
        [ "${tokenCredential}:${server.tokenFile}" ]
    )
    ++ (
      if server == null || (server.tlsCertFile or null) == null then
        [ ]
      else
        [ "${tlsCertCredential}:${server.tlsCertFile}" ]
    )
    ++ (
      if server == null || (server.tlsKeyFile or null) == null then
        [ ]
      else
        [ "${tlsKeyCredential}:${server.tlsKeyFile}" ]
    )
    ++ (
      if server == null || (server.database or null) == null || server.database.passwordFile == null then
        [ ]
      else
        [ "${databaseCredential}:${server.database.passwordFile}" ]
    );

  # Names that occur more than once in a list of strings.
  duplicates =
    names:
    foldl' (
      acc: n: if elem n acc || length (filter (m: m == n) names) < 2 then acc else acc ++ [ n ]
    ) [ ] names;
}
