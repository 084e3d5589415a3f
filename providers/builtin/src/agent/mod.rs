//! Agent Run (`https://jig.md/contracts/agent-run` 1.0.0,
//! docs/src/agents.md): the endpoint configuration, the skills projection, the
//! structured-output profile, the two wire shapes of an OpenAI-compatible
//! endpoint, and the body of the worker process that sends the one
//! request. The host gives the worker its envelope; this module never
//! starts a process.

pub mod acp;
pub mod endpoint;
pub mod profile;
pub mod skills;
pub mod stream;
pub mod values;
pub mod wire;
pub mod worker;

pub use worker::WORKER_ARG;

pub const CONTRACT_ID: &str = "https://jig.md/contracts/agent-run";
/// The Agent Run 1.0.0 descriptor this host serves ([`CONTRACT_DIGEST`]),
/// as `jig new flow --agent` writes it into a package.
pub const DESCRIPTOR: &str = include_str!("../../../../flow/tests/data/agent-run.capability.json");
/// The channel contract [`DESCRIPTOR`]'s `events` port names, at the
/// package path it names ([`UPDATES_PATH`]).
pub const UPDATES_DESCRIPTOR: &str =
    include_str!("../../../../flow/tests/data/acp-public-updates.json");
/// Where [`DESCRIPTOR`] expects [`UPDATES_DESCRIPTOR`] in a package.
pub const UPDATES_PATH: &str = "contracts/acp-public-updates.json";
pub const CONTRACT_VERSION: &str = "1.0.0";
/// Agent Run 1.0.0 as the reference serves it today
/// (`agent-run.capability.json`).
pub const CONTRACT_DIGEST: &str =
    "sha256:b43fba88de62ef189f54004318e9639df58661bb04b3bf76ecfac70e3a5d098b";
/// Agent Run 1.0.0 of reference revision 299110c: `events` names no
/// `delivery`.
pub const EVENTS_NO_DELIVERY_DIGEST: &str =
    "sha256:5e7df4408fd1f6aebf7e1269573a10ff87c7374248a51dacb63cd1c9c97e2b56";
/// Agent Run 1.0.0 of reference revision b38b3a9: no channels.
pub const NO_CHANNELS_DIGEST: &str =
    "sha256:5a0f06495323419d275eeff92617d9287647ece137dacc9c5c6d50466d65c0f0";
