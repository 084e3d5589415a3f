# NixOS VM test. `machine`: `services.jig` enabled, the greeting project run
# end to end as an ordinary user inside jig's rootless containment.
# `server`: `services.jig.server` with the review example declared as a
# served project (admitted at boot), an Agent endpoint served inside the VM
# by fake-agent.py, and a Run submitted over the socket with curl.
# Also on `server`: a contained flow.ts Run (examples/repair, Bun, with a
# Project Command), TCP behind a bearer token, jig.service in jig.slice and
# a ceiling on `systemd-analyze security`'s exposure.
# `queued`: PostgreSQL created by services.jig.database.createLocally,
# `jig serve` enqueueing into it and two `jig worker`s executing; a Run
# submitted over the socket succeeds on a worker, an Agent Run claimed by a
# worker reaches the endpoint with the worker's own key credential, and
# jig-workers.target restarts both.
#
#   nix build .#checks.x86_64-linux.module
{ pkgs }:
let
  agentPort = 8080;
  tcpPort = 8480;
  # systemd-analyze security's overall exposure of jig.service, times ten,
  # may not exceed this (--threshold): 6.0, MEDIUM. Bubblewrap needs
  # namespaces, @mount and a visible /proc, which no unit can drop.
  exposureCeiling = 60;

  # The Agent endpoint stand-in and its key, for a node whose Runs call the
  # Agent: the key written at boot outside the store (host.toml must name
  # only a path), fake-agent.py serving before the jig units start.
  fakeAgent =
    { pkgs, ... }:
    {
      systemd.tmpfiles.settings."10-jig-test-key"."/var/keys/jig-agent".f = {
        user = "root";
        group = "root";
        mode = "0600";
        argument = "test-key";
      };
      systemd.services.fake-agent = {
        description = "OpenAI-compatible stand-in for the jig VM test";
        wantedBy = [ "multi-user.target" ];
        before = [
          "jig.service"
          "jig-workers.target"
        ];
        serviceConfig = {
          ExecStart = "${pkgs.python3}/bin/python3 ${./fake-agent.py} ${toString agentPort} /var/lib/fake-agent/requests.jsonl";
          StateDirectory = "fake-agent";
          DynamicUser = true;
        };
      };
    };
  agent = {
    api = "chat-completions";
    baseUrl = "http://127.0.0.1:${toString agentPort}/v1";
    model = "test-model";
    apiKeyFile = "/var/keys/jig-agent";
  };
in
pkgs.testers.runNixOSTest {
  name = "jig";

  nodes.machine =
    { config, ... }:
    {
      imports = [ ./default.nix ];

      services.jig = {
        enable = true;
        # Keep the VM small; also shows that a null runtime is left out.
        settings.runtimes = {
          bun = null;
          deno = null;
        };
        projects.intake = {
          path = "/home/alice/intake";
          user = "alice";
        };
      };

      users.users.alice = {
        isNormalUser = true;
        uid = 1000;
        # A running user manager gives jig a delegated cgroup subtree without
        # an interactive login.
        linger = true;
      };

      virtualisation.memorySize = 2048;
      virtualisation.cores = 2;
    };

  nodes.server =
    { pkgs, ... }:
    {
      imports = [
        ./default.nix
        fakeAgent
      ];

      services.jig = {
        enable = true;
        settings.runtimes = {
          deno = null;
        };
        server = {
          enable = true;
          maxActiveRuns = 2;
          shutdownGrace = "10s";
          # TCP on loopback behind a bearer token.
          tcp = "127.0.0.1:${toString tcpPort}";
          tokenFile = "/var/keys/jig-token";
        };
        inherit agent;
        projects.review.source = ../examples/review;
        # A flow.ts Run (Bun) whose Project Command runs in its own envelope.
        projects.repair.source = ../examples/repair;
      };

      systemd.tmpfiles.settings."10-jig-test-token"."/var/keys/jig-token".f = {
        user = "root";
        group = "root";
        mode = "0600";
        argument = "test-token";
      };

      environment.systemPackages = [ pkgs.curl ];
      virtualisation.memorySize = 2048;
      virtualisation.cores = 2;
    };

  nodes.queued =
    { ... }:
    {
      imports = [
        ./default.nix
        fakeAgent
      ];

      services.jig = {
        enable = true;
        settings.runtimes = {
          bun = null;
          deno = null;
        };
        # PostgreSQL on this machine, reached over its socket with peer
        # authentication (the units run as `jig`); the server and the
        # workers default to it.
        database.createLocally = true;
        server.enable = true;
        worker = {
          count = 2;
          concurrency = 1;
        };
        # The workers reach the Agent with their own key credential.
        inherit agent;
        projects.triage.source = ../examples/triage;
        projects.review.source = ../examples/review;
      };

      environment.systemPackages = [ pkgs.curl ];
      virtualisation.memorySize = 2048;
      virtualisation.cores = 2;
    };

  testScript =
    { nodes, ... }:
    let
      jig = nodes.machine.services.jig.package;
      bwrap = nodes.machine.services.jig.settings.containment.bwrap;
      python = nodes.machine.services.jig.settings.runtimes.python;
    in
    ''
      import shlex

      def as_alice(command):
          # A login shell picks up JIG_CONFIG; the runtime dir and bus reach
          # alice's systemd user manager for transient scopes.
          script = (
              "export XDG_RUNTIME_DIR=/run/user/1000 "
              "DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1000/bus; "
              + command
          )
          return machine.succeed("su -l alice -c " + shlex.quote(script))

      machine.wait_for_unit("multi-user.target")
      machine.wait_for_unit("user@1000.service")

      with subtest("host.toml names store paths, not PATH lookups"):
          host_toml = machine.succeed("cat /etc/jig/host.toml")
          assert 'bwrap = "${bwrap}"' in host_toml, host_toml
          assert 'python = "${python}"' in host_toml, host_toml
          assert "deno" not in host_toml and "bun" not in host_toml, host_toml
          assert "[agent]" not in host_toml, host_toml
          assert as_alice("echo $JIG_CONFIG").strip() == "/etc/jig/host.toml"

      with subtest("declared project directories"):
          assert machine.succeed("stat -c '%U %a' /home/alice/intake").strip() == "alice 750"
          assert machine.succeed("stat -c '%U %a' /home/alice/intake/.jig").strip() == "alice 700"

      with subtest("user namespaces and cgroup delegation"):
          machine.succeed("test \"$(cat /proc/sys/user/max_user_namespaces)\" -gt 0")
          delegated = machine.succeed(
              "cat /sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/cgroup.controllers"
          )
          for controller in ("cpu", "memory", "pids"):
              assert controller in delegated.split(), delegated

      with subtest("jig --version"):
          out = as_alice("jig --version")
          assert "${jig.version}" in out, out

      with subtest("jig doctor"):
          print(as_alice("jig doctor"))

      with subtest("greeting project: init, review, run"):
          as_alice("jig init demo")
          as_alice("cd demo && jig review --yes")
          out = as_alice("cd demo && jig run flow:flows/hello --input '\"Ada\"'")
          assert "Hello, Ada!" in out, out

      # ---- the server --------------------------------------------------
      import json

      server.wait_for_unit("multi-user.target")
      server.wait_for_unit("fake-agent.service")

      with subtest("the declared project is admitted at boot"):
          server.wait_for_unit("jig-admit-review.service")
          server.succeed("test -d /var/lib/jig/projects/review/.jig")
          assert server.succeed("stat -c %U /var/lib/jig/projects/review").strip() == "jig"
          server.succeed("journalctl -u jig-admit-review.service --no-pager >&2")

      with subtest("jig.service reads its own host.toml, naming credential paths, never the key"):
          serve_toml = server.succeed("cat /etc/jig/serve.toml")
          assert 'api-key-file = "/run/credentials/jig.service/agent-key"' in serve_toml, serve_toml
          assert "/var/keys" not in serve_toml and "test-key" not in serve_toml, serve_toml
          assert 'socket = "/run/jig/jig.sock"' in serve_toml, serve_toml
          server.succeed("jig config check /etc/jig/serve.toml")
          # jig at a shell reads /etc/jig/host.toml: the operator's file.
          host_toml = server.succeed("cat /etc/jig/host.toml")
          assert 'api-key-file = "/var/keys/jig-agent"' in host_toml, host_toml
          server.fail("grep -r test-key /nix/store/*-jig-*.toml")

      with subtest("a Run submitted over the socket reaches the Agent endpoint"):
          server.wait_for_unit("jig.socket")
          body = json.dumps({
              "target": "binding:reviewer",
              "input": "- return a + b\n+ return a - b",
              "timeout": "120s",
          })
          out = server.succeed(
              "curl -sS --max-time 180 --unix-socket /run/jig/jig.sock "
              "-H 'content-type: application/json' "
              f"--data {shlex.quote(body)} http://jig/v1/projects/review/runs"
          )
          terminal = json.loads(out)
          assert terminal["status"] == "succeeded", out
          assert terminal["output"] == {"verdict": "approve", "concerns": []}, out
          requests = [
              json.loads(line)
              for line in server.succeed("cat /var/lib/fake-agent/requests.jsonl").splitlines()
          ]
          assert requests and requests[-1]["path"] == "/v1/chat/completions", requests
          assert requests[-1]["authorization"] == "Bearer test-key", requests
          assert requests[-1]["model"] == "test-model", requests

      with subtest("the Run is listed"):
          runs = json.loads(server.succeed(
              "curl -sS --unix-socket /run/jig/jig.sock http://jig/v1/projects/review/runs"
          ))
          assert terminal["runId"] in [r["id"] for r in runs["runs"]], runs

      with subtest("a contained flow.ts Run under jig.service: tests before and after a change"):
          server.wait_for_unit("jig-admit-repair.service")
          body = json.dumps({
              "target": "binding:fixer",
              "input": json.loads(server.succeed("cat /var/lib/jig/projects/repair/input.json")),
              "timeout": "180s",
          })
          out = server.succeed(
              "curl -sS --max-time 240 --unix-socket /run/jig/jig.sock "
              "-H 'content-type: application/json' "
              f"--data {shlex.quote(body)} http://jig/v1/projects/repair/runs"
          )
          repaired = json.loads(out)
          assert repaired["status"] == "succeeded", out
          assert repaired["output"]["before"]["exitCode"] == 1, out
          assert repaired["output"]["after"]["exitCode"] == 0, out

      with subtest("TCP answers only with the bearer token"):
          server.wait_for_open_port(${toString tcpPort})
          status = server.succeed(
              "curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:${toString tcpPort}/v1/health"
          )
          assert status == "401", status
          health = json.loads(server.succeed(
              "curl -sS -H 'authorization: Bearer test-token' http://127.0.0.1:${toString tcpPort}/v1/health"
          ))
          assert "review" in json.dumps(health), health

      with subtest("jig.service has a delegated cgroup with cpu, memory and pids, in jig.slice"):
          delegated = server.succeed("cat /sys/fs/cgroup/jig.slice/jig.service/cgroup.controllers")
          for controller in ("cpu", "memory", "pids"):
              assert controller in delegated.split(), delegated

      with subtest("jig.service's exposure stays under the ceiling"):
          print(server.succeed("systemd-analyze security jig.service --no-pager || true"))
          server.succeed("systemd-analyze security jig.service --no-pager --threshold=${toString exposureCeiling}")

      with subtest("re-running the admission keeps the service serving"):
          server.succeed("systemctl restart jig-admit-review.service")
          server.succeed("systemctl is-active jig.service")
          again = json.loads(server.succeed(
              "curl -sS --max-time 180 --unix-socket /run/jig/jig.sock "
              "-H 'content-type: application/json' "
              f"--data {shlex.quote(body)} http://jig/v1/projects/review/runs"
          ))
          assert again["status"] == "succeeded", again

      # ---- the queue: serve enqueues, workers execute -------------------
      queued.wait_for_unit("postgresql.target")
      queued.wait_for_unit("jig-admit-triage.service")
      queued.wait_for_unit("jig-worker-1.service")
      queued.wait_for_unit("jig-worker-2.service")
      queued.wait_for_unit("jig.socket")

      with subtest("a Run submitted to serve --database succeeds on a worker"):
          body = json.dumps({
              "target": "flow:flows/code",
              "input": "The app crashes when I log in",
              "timeout": "120s",
          })
          out = queued.succeed(
              "curl -sS --max-time 180 --unix-socket /run/jig/jig.sock "
              "-H 'content-type: application/json' "
              f"--data {shlex.quote(body)} http://jig/v1/projects/triage/runs"
          )
          terminal = json.loads(out)
          assert terminal["status"] == "succeeded", out
          assert terminal["output"]["label"] == "bug", out
          owner = queued.succeed(
              "runuser -u postgres -- psql -d jig -A -t -c "
              + shlex.quote(f"SELECT owner FROM jig_runs WHERE id = '{terminal['runId']}'")
          ).strip()
          assert owner, "the Run was claimed by a worker"
          queued.succeed("journalctl -u 'jig-worker-*' --no-pager | grep -q jig.worker.started")

      with subtest("the Run is listed from the database"):
          runs = json.loads(queued.succeed(
              "curl -sS --unix-socket /run/jig/jig.sock http://jig/v1/projects/triage/runs"
          ))
          assert terminal["runId"] in [r["id"] for r in runs["runs"]], runs

      with subtest("an Agent Run is claimed by a worker, which reaches the endpoint with its own key"):
          queued.wait_for_unit("jig-admit-review.service")
          queued.wait_for_unit("fake-agent.service")
          worker_toml = queued.succeed("cat $(systemctl show -P ExecStart jig-worker-1 | grep -o '/nix/store/[^ ]*-jig-host-worker-1.toml')")
          assert 'api-key-file = "/run/credentials/jig-worker-1.service/agent-key"' in worker_toml, worker_toml
          body = json.dumps({
              "target": "binding:reviewer",
              "input": "- return a + b\n+ return a - b",
              "timeout": "120s",
          })
          out = queued.succeed(
              "curl -sS --max-time 180 --unix-socket /run/jig/jig.sock "
              "-H 'content-type: application/json' "
              f"--data {shlex.quote(body)} http://jig/v1/projects/review/runs"
          )
          reviewed = json.loads(out)
          assert reviewed["status"] == "succeeded", out
          assert reviewed["output"] == {"verdict": "approve", "concerns": []}, out
          owner = queued.succeed(
              "runuser -u postgres -- psql -d jig -A -t -c "
              + shlex.quote(f"SELECT owner FROM jig_runs WHERE id = '{reviewed['runId']}'")
          ).strip()
          assert owner, "the Agent Run was claimed by a worker"
          requests = [
              json.loads(line)
              for line in queued.succeed("cat /var/lib/fake-agent/requests.jsonl").splitlines()
          ]
          assert requests and requests[-1]["authorization"] == "Bearer test-key", requests

      with subtest("the workers restart together"):
          before = queued.succeed("systemctl show -P InvocationID jig-worker-1 jig-worker-2").split()
          queued.succeed("systemctl restart jig-workers.target")
          queued.wait_for_unit("jig-worker-1.service")
          queued.wait_for_unit("jig-worker-2.service")
          after = queued.succeed("systemctl show -P InvocationID jig-worker-1 jig-worker-2").split()
          assert len(after) == 2 and not set(before) & set(after), (before, after)
    '';
}
