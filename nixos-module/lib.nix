# Pure helpers shared by the package, the NixOS module and the offline checks.
#
# This file uses builtins only (never nixpkgs `lib`), so `check.sh` can evaluate
# and test it on a machine without a nixpkgs checkout. It owns the spec limits
# that the module enforces on operator input and the rendering of host.toml.
let
  inherit (builtins)
    all
    attrNames
    concatStringsSep
    elem
    filter
    foldl'
    genList
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
  # HOST-FACTS §6: OPENAI_MODEL must match this; there is no default model.
  maxModelLength = 256;
  modelPattern = "[A-Za-z0-9][A-Za-z0-9._:/-]{0,${toString (maxModelLength - 1)}}";

  # HOST-FACTS §6: the base URL is https only, at most 4096 characters, with no
  # userinfo, query or fragment.
  maxBaseUrlLength = 4096;
  baseUrlPattern = "https://[^/?#@[:space:]]+(/[^?#[:space:]]*)?";

  # HOST-FACTS §6: the two wire shapes of a direct OpenAI-compatible endpoint.
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

  # HOST-FACTS §5: containment requires Bubblewrap >= 0.12.
  minBubblewrapVersion = "0.12";

  # Modes for what the module creates for a declared project.
  projectDirMode = "0750";
  stateDirMode = "0700";
  stateDirName = ".jig";

  isModel = s: isString s && match modelPattern s != null;

  isBaseUrl = s: isString s && stringLength s <= maxBaseUrlLength && match baseUrlPattern s != null;

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

  # Names that occur more than once in a list of strings.
  duplicates =
    names:
    foldl' (
      acc: n: if elem n acc || length (filter (m: m == n) names) < 2 then acc else acc ++ [ n ]
    ) [ ] names;

  # A string of `n` copies of `c` (used by the limit tests).
  repeat = n: c: concatStringsSep "" (genList (_: c) n);
}
