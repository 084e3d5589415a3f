# NixOS VM test: a machine with `services.jig` enabled runs the greeting
# project end to end as an ordinary user, inside jig's rootless containment.
#
#   nix build .#checks.x86_64-linux.module
{ pkgs }:
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
    '';
}
