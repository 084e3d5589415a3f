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
    concatMap
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
    mapAttrs
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

  # jig refuses a Bubblewrap older than this, the oldest with --size (the
  # bounded tmpfs): host/sandbox BWRAP_MIN_VERSION, docs/src/containment.md.
  minBubblewrapVersion = "0.7.0";

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
  # The slice every jig unit (jig.service, the admission units, the
  # workers) runs in, so all their Runs are capped together.
  slice = "jig.slice";
  # The target the workers are part of: restart it to restart them all.
  workersTarget = "jig-workers.target";
  # The database services.jig.database.createLocally creates, owned by the
  # `jig` role of the same name as the user.
  databaseName = "jig";
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
  # A credential ID itself: a file name of at most 255 characters
  # (systemd's credential_name_valid()).
  maxCredentialIdLength = 255;
  credentialIdPattern = "[A-Za-z0-9_][A-Za-z0-9_.-]{0,${toString (maxCredentialIdLength - 1)}}";
  isCredentialId = s: isString s && match credentialIdPattern s != null;

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
  # The port of such an address, or 0 when it is not one.
  tcpPort =
    s:
    let
      m = if isString s then match "([[][0-9A-Fa-f:.]+[]]|[A-Za-z0-9.-]+):([0-9]{1,5})" s else null;
    in
    if m == null then 0 else digitsToInt (builtins.elemAt m 1);
  isTcpAddress =
    s:
    let
      port = tcpPort s;
    in
    port >= 1 && port <= maxPort;
  # jig.service holds no capabilities (CapabilityBoundingSet= is empty), so
  # it cannot bind a port below 1024.
  minServerPort = 1024;
  isServerTcp = s: isTcpAddress s && tcpPort s >= minServerPort;

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

  secretCredential = name: "secret-${name}";
  providerSecretCredential = provider: name: "provider-${provider}-${name}";
  credentialsDir = unit: "/run/credentials/${unit}";

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

  # The files a host.toml value names that hold secrets, each with the
  # systemd credential ID a unit is handed it as (LoadCredential=ID:FILE):
  # the Agent's key, `[secrets]`, the server's token and TLS files, the
  # database password and every provider's secrets, however they were set
  # (a typed option or `settings` itself).
  credentials =
    value:
    let
      table = name: if isAttrs (value.${name} or null) then value.${name} else { };
      file =
        attrs: key: id:
        if isString (attrs.${key} or null) then
          [
            {
              inherit id;
              file = attrs.${key};
            }
          ]
        else
          [ ];
      secrets = table "secrets";
    in
    file (table "agent") "api-key-file" agentKeyCredential
    ++ map (n: {
      id = secretCredential n;
      file = secrets.${n};
    }) (attrNames secrets)
    ++ file (table "serve") "token-file" tokenCredential
    ++ file (table "serve") "tls-cert" tlsCertCredential
    ++ file (table "serve") "tls-key" tlsKeyCredential
    ++ file (table "database") "password-file" databaseCredential
    ++ concatMap (
      p:
      map (n: {
        id = providerSecretCredential p.name n;
        file = p.secrets.${n};
      }) (attrNames (p.secrets or { }))
    ) (value.providers or [ ]);

  # LoadCredential= lines for a host.toml value's secret files.
  loadCredentials = value: map (c: "${c.id}:${c.file}") (credentials value);

  # The same value as a unit reads it: each secret file replaced by the
  # path of its credential in `dir` (the unit's credentials directory).
  withCredentials =
    dir: value:
    let
      cred = id: "${dir}/${id}";
      table =
        name: f:
        if isAttrs (value.${name} or null) then
          {
            ${name} = f value.${name};
          }
        else
          { };
      set =
        key: id: attrs:
        if isString (attrs.${key} or null) then attrs // { ${key} = cred id; } else attrs;
    in
    value
    // table "agent" (set "api-key-file" agentKeyCredential)
    // table "secrets" (mapAttrs (n: _: cred (secretCredential n)))
    // table "serve" (
      t: set "tls-key" tlsKeyCredential (set "tls-cert" tlsCertCredential (set "token-file" tokenCredential t))
    )
    // table "database" (set "password-file" databaseCredential)
    // (
      if value ? providers then
        {
          providers = map (
            p:
            if (p.secrets or { }) == { } then
              p
            else
              p // { secrets = mapAttrs (n: _: cred (providerSecretCredential p.name n)) p.secrets; }
          ) value.providers;
        }
      else
        { }
    );

  # Names that occur more than once in a list of strings.
  duplicates =
    names:
    foldl' (
      acc: n: if elem n acc || length (filter (m: m == n) names) < 2 then acc else acc ++ [ n ]
    ) [ ] names;
}
