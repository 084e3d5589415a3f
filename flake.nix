{
  description = "jig: a FLOW host";

  # nixos-unstable: jig needs rustc >= Cargo.toml's rust-version (1.95),
  # newer than nixos-25.11's (1.91). The module below installs this flake's
  # own build, so hosts on an older release run it all the same.
  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";

  outputs =
    { self, nixpkgs }:
    let
      inherit (nixpkgs) lib;

      # jig's containment is Linux-only (user namespaces, cgroup v2, Bubblewrap).
      systems = [
        "x86_64-linux"
        "aarch64-linux"
      ];

      forEachSystem = f: lib.genAttrs systems (system: f system nixpkgs.legacyPackages.${system});
    in
    {
      packages = forEachSystem (
        _system: pkgs:
        let
          jig = pkgs.callPackage ./nixos-module/package.nix { };
        in
        {
          inherit jig;
          default = jig;
        }
      );

      apps = forEachSystem (
        system: _pkgs: {
          default = {
            type = "app";
            program = "${self.packages.${system}.default}/bin/jig";
            meta.description = "Run the jig FLOW host";
          };
        }
      );

      devShells = forEachSystem (
        _system: pkgs: {
          default = pkgs.mkShell {
            packages = [
              pkgs.rustc
              pkgs.cargo
              pkgs.clippy
              pkgs.rustfmt
              pkgs.rust-analyzer
              pkgs.python3
              pkgs.bubblewrap
              pkgs.nodejs
              pkgs.clang
              pkgs.lld
              pkgs.wasm-tools
              pkgs.wabt
              pkgs.nixfmt-tree
            ];
            RUST_SRC_PATH = "${pkgs.rustPlatform.rustLibSrc}";
            # Same lookup as the installed host: containment by absolute path.
            JIG_BWRAP_PATH = "${pkgs.bubblewrap}/bin/bwrap";
          };
        }
      );

      # Packaging a capability provider written in Rust against the guest
      # SDK as a wasm32-wasip2 component, so a NixOS configuration can name
      # it as a store path (services.jig settings: [[providers]] path =
      # "${provider}/lib/NAME.wasm"):
      #
      #   kv = jig.lib.buildJigProvider {
      #     inherit pkgs;
      #     pname = "kv-provider";
      #     src = ./kv;                      # has Cargo.toml and Cargo.lock
      #   };
      #
      # `rustPlatform` must have the wasm32-wasip2 standard library (nixpkgs'
      # own rustc may not: pass one from a Rust toolchain overlay). The
      # provider's `jig-provider-sdk = { path = ... }` dependency is pointed
      # at this flake's providers/sdk, so a scaffold made by `jig provider
      # new` builds unchanged. Every other argument goes to
      # buildRustPackage.
      lib.buildJigProvider =
        {
          pkgs,
          src,
          pname,
          version ? "0.1.0",
          rustPlatform ? pkgs.rustPlatform,
          cargoLock ? {
            lockFile = src + "/Cargo.lock";
          },
          ...
        }@args:
        rustPlatform.buildRustPackage (
          removeAttrs args [
            "pkgs"
            "rustPlatform"
          ]
          // {
            inherit
              pname
              version
              src
              cargoLock
              ;
            postPatch = ''
              sed -i -E 's|^jig-provider-sdk = \{ path = "[^"]*" \}|jig-provider-sdk = { path = "${self}/providers/sdk" }|' Cargo.toml
            ''
            + (args.postPatch or "");
            buildPhase = ''
              runHook preBuild
              cargo build --release --offline --lib --target wasm32-wasip2
              runHook postBuild
            '';
            # A component runs only under a host; `jig provider call` is the test.
            doCheck = false;
            installPhase = ''
              runHook preInstall
              mkdir -p $out/lib
              cp "''${CARGO_TARGET_DIR:-target}"/wasm32-wasip2/release/*.wasm $out/lib/
              runHook postInstall
            '';
          }
        );

      # The module, with services.jig.package defaulting to this flake's own
      # build (its pinned nixpkgs' rustc), whatever the host's nixpkgs
      # release: nixos-25.11's rustc cannot build jig. Imported without the
      # flake, the module builds jig with the system's nixpkgs instead.
      nixosModules.default =
        { lib, pkgs, ... }:
        {
          imports = [ ./nixos-module ];
          services.jig.package = lib.mkDefault self.packages.${pkgs.stdenv.hostPlatform.system}.default;
        };

      overlays.default = final: _prev: {
        jig = final.callPackage ./nixos-module/package.nix { };
      };

      checks = forEachSystem (
        system: pkgs:
        {
          package = self.packages.${system}.default;
        }
        // lib.optionalAttrs pkgs.stdenv.hostPlatform.isLinux {
          module = import ./nixos-module/test.nix { inherit pkgs; };
        }
      );

      formatter = forEachSystem (_system: pkgs: pkgs.nixfmt-tree);
    };
}
