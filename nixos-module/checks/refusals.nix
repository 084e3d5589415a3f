# Configurations the module refuses, each with what its refusal must say.
# A Nix evaluation ends at its first error, so ../check.sh builds each case
# in its own nix-instantiate (`case` names it) and looks for `message` in
# what it prints; without `case` this is the messages by case name.
{
  nixpkgsLib,
  case ? null,
}:
let
  system = import ./system.nix { inherit nixpkgsLib; };
  hosts = import ./hosts.nix system;
  inherit (hosts) serverWith userWith workerWith;
  repeat = n: s: system.lib.strings.replicate n s;
  store = builtins.storeDir;
  typeError = option: type: "A definition for option `services.jig.${option}' is not of type `${type}'";
  failedAssertion = message: "Failed assertions: - ${message}";

  cases = {
    "agent.model of 257 characters" = {
      host = serverWith { agent.model = repeat 257 "m"; };
      message = typeError "agent.model" "model name matching `[A-Za-z0-9][A-Za-z0-9._:/-]{0,255}`";
    };
    "agent.baseUrl of 4097 characters" = {
      host = serverWith { agent.baseUrl = "https://h/" + repeat 4087 "a"; };
      message = typeError "agent.baseUrl" "null or https URL (or http to a loopback host) without userinfo, query or fragment, at most 4096 characters";
    };
    "agent.apiKeyFile in the store" = {
      host = serverWith { agent.apiKeyFile = "${store}/00000000000000000000000000000000-key"; };
      message = typeError "agent.apiKeyFile" "absolute path to a file outside the Nix store, handed over with LoadCredential";
    };
    "agent.apiKeyFile as a Nix path" = {
      host = serverWith { agent.apiKeyFile = ./refusals.nix; };
      message = typeError "agent.apiKeyFile" "absolute path to a file outside the Nix store, handed over with LoadCredential";
    };
    "retention.maxAge in weeks" = {
      host = serverWith { retention.maxAge = "2w"; };
      message = typeError "retention.maxAge" "null or duration matching `[1-9][0-9]*(s|m|h|d)`, at most 3650d";
    };
    "retention without a limit" = {
      host = serverWith { retention.interval = "1m"; };
      message = failedAssertion "services.jig.retention: set maxAge, maxRuns or packetsMaxAge (null removes nothing)";
    };
    "server.maxActiveRuns of 0" = {
      host = serverWith { server.maxActiveRuns = 0; };
      message = typeError "server.maxActiveRuns" "null or positive integer";
    };
    "server.tcp port 65536" = {
      host = serverWith { server.tcp = "0.0.0.0:65536"; };
      message = typeError "server.tcp" "null or host:port or [address]:port, port 1024-65535";
    };
    "server.tcp port 1023" = {
      host = serverWith { server.tcp = "127.0.0.1:1023"; };
      message = typeError "server.tcp" "null or host:port or [address]:port, port 1024-65535";
    };
    "settings.serve.max-active-runs against server.maxActiveRuns" = {
      host = serverWith { settings.serve.max-active-runs = 8; };
      message = "The option `services.jig.settings.serve.max-active-runs' has conflicting definition values";
    };
    "a secret file in the store through settings" = {
      host = serverWith { settings.secrets.stored = "${store}/00000000000000000000000000000000-secret"; };
      message = failedAssertion "services.jig.settings: the secret file ${store}/00000000000000000000000000000000-secret (credential `secret-stored`) must be an absolute path outside the Nix store";
    };
    "server.database.url with a password" = {
      host = serverWith { server.database.url = "postgresql://jig:secret@db/jig"; };
      message = typeError "server.database.url" "postgresql:// URL without a password";
    };
    "worker.concurrency of 0" = {
      host = workerWith { worker.concurrency = 0; };
      message = typeError "worker.concurrency" "positive integer";
    };
    "a served project named with 65 characters" = {
      host = serverWith { projects.${repeat 65 "p"}.source = hosts.greeterSrc; };
      message = failedAssertion "services.jig.projects.${repeat 65 "p"}: a served project's name must be a LocalName (`[a-z0-9]+(-[a-z0-9]+)*`, at most 64 characters)";
    };
    "a secret named with 65 characters" = {
      host = serverWith { secrets.${repeat 65 "s"} = "/var/keys/s"; };
      message = failedAssertion "services.jig.secrets.${repeat 65 "s"}: the name must match `[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}` (a systemd credential ID)";
    };
    "tcp without tokenFile" = {
      host = system.jig (removeAttrs hosts.serverCfg [ "server" ] // {
        server = removeAttrs hosts.serverCfg.server [ "tokenFile" ];
      }) [ hosts.users ];
      message = failedAssertion "services.jig.server: `tcp` and `tokenFile` go together";
    };
    "tcp off loopback without TLS" = {
      host = serverWith { server.tcp = "0.0.0.0:8480"; };
      message = failedAssertion "services.jig.server: `tcp` 0.0.0.0:8480 is not a loopback address, and plain HTTP would carry the bearer token in clear: set `tlsCertFile` and `tlsKeyFile` (security.acme's files work), or listen on loopback behind a reverse proxy that terminates TLS, or set `insecurePlainHttp`";
    };
    "workers without a database" = {
      host = workerWith { worker.database = null; };
      message = failedAssertion "services.jig.worker.database: workers need the database URL";
    };
    "a user project without a path" = {
      host = userWith { projects.loose.user = "alice"; };
      message = "services.jig.projects.loose.path: set it, or set `source`";
    };
  };
in
if case == null then builtins.mapAttrs (_: r: r.message) cases else system.build cases.${case}.host
