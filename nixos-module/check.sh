#!/usr/bin/env bash
# Offline checks of the Nix packaging: parses every Nix file, checks flake.lock
# against the recorded nixos-unstable pin, evaluates the flake inputs, then evaluates
# the flake, the package and the NixOS module with nixpkgs' real lib
# (lib.evalModules; stand-ins only for NixOS's own options and for nixpkgs'
# packages, in checks/): the tests in checks/tests.nix (units, host.toml,
# assertions, each limit at its bound and one past it, the VM test's nodes),
# the refusals in checks/refusals.nix with their messages, and the module's
# option list against checks/options.expected.
#
# nixpkgs' lib is ../shared/nix/nixpkgs-lib/lib beside this checkout, or
# $JIG_NIXPKGS_LIB (any nixpkgs' lib/ directory). nixpkgs itself is not
# needed (and cannot be fetched here); building the package and running the
# NixOS VM test is `nix flake check` on a Nix machine.
#
# Last, `jig config check` judges the rendered host.toml files: $JIG_BIN,
# else target/debug/jig of this checkout (a worktree without a build can
# point JIG_BIN at another checkout's); skipped, saying so, when neither is
# there.
# Exits non-zero on the first failing step.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
pins="${JIG_NIXPKGS_PINS:-$root/../shared/nix/nixpkgs-pins.json}"
nixpkgs_lib="${JIG_NIXPKGS_LIB:-$root/../shared/nix/nixpkgs-lib/lib}"

if ! command -v nix-instantiate >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "check.sh: installing nix-bin for nix-instantiate" >&2
    apt-get install -y nix-bin >/dev/null 2>&1 \
      || { apt-get update >/dev/null && apt-get install -y nix-bin >/dev/null; }
  else
    echo "check.sh: nix-instantiate not found (install nix-bin)" >&2
    exit 1
  fi
fi

if [ ! -f "$nixpkgs_lib/modules.nix" ]; then
  echo "check.sh: no nixpkgs lib at $nixpkgs_lib (set JIG_NIXPKGS_LIB to the lib/ directory of nixpkgs or of its nixpkgs.lib mirror)" >&2
  exit 1
fi
nixpkgs_lib="$(cd "$nixpkgs_lib" && pwd)"

step() { printf '== %s\n' "$1"; }
eval_nix() { nix-instantiate --eval --strict "$@"; }
# Evaluate a file of checks/ with nixpkgs' lib.
eval_checks() { eval_nix --argstr nixpkgsLib "$nixpkgs_lib" "$@"; }

cd "$root"

step "parse"
for file in flake.nix nixos-module/*.nix nixos-module/checks/*.nix; do
  nix-instantiate --parse "$file" >/dev/null
  echo "ok $file"
done

step "flake.lock"
eval_nix -E '
  let lock = builtins.fromJSON (builtins.readFile ./flake.lock);
  in assert lock.version == 7 && lock.nodes.nixpkgs.original.ref == "nixos-unstable"; lock.nodes.nixpkgs.locked.rev'
if [ -f "$pins" ]; then
  eval_nix --arg pinsFile "$pins" -E '
    { pinsFile }:
    let
      pin = removeAttrs (builtins.fromJSON (builtins.readFile pinsFile))."nixos-unstable" [ "seen_in" ];
      locked = (builtins.fromJSON (builtins.readFile ./flake.lock)).nodes.nixpkgs.locked;
    in
    if pin == locked then "matches the nixos-unstable pin"
    else throw "flake.lock nixpkgs ${builtins.toJSON locked} differs from pin ${builtins.toJSON pin}"'
else
  echo "no pins file at $pins; lock checked structurally only"
fi

step "flake inputs"
eval_nix -E '(import ./flake.nix).inputs'

step "nixpkgs lib"
version="$(eval_checks -E '{ nixpkgsLib }: (import ./nixos-module/checks/nixpkgs-lib.nix nixpkgsLib).version')"
echo "lib ${version//\"/} at $nixpkgs_lib"

step "evaluation tests"
results="$(eval_checks --json nixos-module/checks/tests.nix)"
python3 - "$results" <<'PY'
import json, sys
results = json.loads(sys.argv[1])
for name in results["passed"]:
    print("ok", name)
for case in results["failed"]:
    print("FAILED", case["name"])
    print("  result:  ", json.dumps(case["result"], sort_keys=True))
    print("  expected:", json.dumps(case["expected"], sort_keys=True))
print(len(results["passed"]), "passed,", len(results["failed"]), "failed")
sys.exit(1 if results["failed"] else 0)
PY

step "refusals"
# A Nix evaluation ends at its first error: each case is built in its own,
# which must fail and say the case's message.
python3 - "$nixpkgs_lib" <<'PY'
import json, subprocess, sys
lib = sys.argv[1]
nix = ["nix-instantiate", "--eval", "--strict", "--argstr", "nixpkgsLib", lib]
file = "nixos-module/checks/refusals.nix"
messages = json.loads(subprocess.run(nix + ["--json", file], check=True, capture_output=True, text=True).stdout)
# Nix indents the lines of a message; compare with whitespace collapsed.
words = lambda s: " ".join(s.split())
for name, message in sorted(messages.items()):
    run = subprocess.run(nix + ["--argstr", "case", name, file], capture_output=True, text=True)
    if run.returncode == 0:
        sys.exit(f"FAILED {name}: built, not refused")
    if words(message) not in words(run.stderr):
        sys.exit(f"FAILED {name}: the refusal does not say\n  {message}\nbut:\n{run.stderr}")
    print("ok", name)
print(len(messages), "refused with their messages")
PY

step "option list"
actual="$(mktemp)"
trap 'rm -f "$actual"' EXIT
eval_checks --json nixos-module/checks/options.nix \
  | python3 -c 'import json, sys; sys.stdout.write(json.load(sys.stdin))' >"$actual"
if ! diff -u nixos-module/checks/options.expected "$actual"; then
  echo "option list changed: update nixos-module/checks/options.expected if intended" >&2
  exit 1
fi
echo "ok $(grep -c . nixos-module/checks/options.expected) options"

step "the guide's options page"
page="$(mktemp)"
trap 'rm -f "$actual" "$page"' EXIT
eval_checks --json nixos-module/checks/options-page.nix \
  | python3 -c 'import json, sys; sys.stdout.write(json.load(sys.stdin))' >"$page"
if [ "${JIG_WRITE_OPTIONS_PAGE:-}" = 1 ]; then
  cp "$page" docs/src/nixos-options.md
  echo "wrote docs/src/nixos-options.md"
elif ! diff -u docs/src/nixos-options.md "$page"; then
  echo "docs/src/nixos-options.md differs from the module's options: JIG_WRITE_OPTIONS_PAGE=1 bash nixos-module/check.sh rewrites it" >&2
  exit 1
fi
echo "ok docs/src/nixos-options.md"

step "rendered host.toml accepted by jig config check"
# The real loader judges what the module writes. JIG_BIN, else a debug build
# of this checkout; skipped when neither exists (no Rust build here).
jig="${JIG_BIN:-$root/target/debug/jig}"
if [ -x "$jig" ]; then
  rendered="$(mktemp -d)"
  trap 'rm -f "$actual" "$page"; rm -rf "$rendered"' EXIT
  printf '[serve]\n' >"$rendered/probe.toml"
  variants="plain"
  # The server tables need a jig that has `jig serve`'s [serve] table.
  if "$jig" config check "$rendered/probe.toml" >/dev/null 2>&1; then
    variants="plain server worker"
  else
    echo "skip server: $jig does not know [serve]"
  fi
  for variant in $variants; do
    eval_checks --json -A "$variant" nixos-module/checks/rendered.nix \
      | python3 nixos-module/checks/totoml.py >"$rendered/$variant.toml"
    "$jig" config check "$rendered/$variant.toml" >/dev/null
    echo "ok $variant"
  done
else
  echo "skip: no jig at $jig (set JIG_BIN)"
fi

echo "all Nix checks passed"
