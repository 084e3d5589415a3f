//! Agent Run (`https://jig.md/contracts/agent-run` 1.0.0, HOST-FACTS §1 and
//! §6): the endpoint configuration, the skills projection, the
//! structured-output profile, the two wire shapes of an OpenAI-compatible
//! endpoint, and the body of the worker process that sends the one
//! request. The host gives the worker its envelope; this module never
//! starts a process.

pub mod acp;
pub mod endpoint;
pub mod profile;
pub mod skills;
pub mod stream;
pub mod wire;
pub mod worker;

pub use worker::WORKER_ARG;
