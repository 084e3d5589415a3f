//! The `jig` host's integration tests: one binary, a module per area. Every
//! test drives the real `jig` executable as a user would and asserts what the
//! user sees: bytes on stdout, codes on stderr, exit statuses.

mod acp;
mod admission;
mod agent;
mod author;
mod binding;
mod channels;
mod checkpoint;
mod cli;
mod command;
mod config_check;
mod console;
mod containment;
mod dependencies;
mod dev;
mod editor;
mod exec;
mod failures;
mod files;
mod fixtures;
mod greeting;
mod guide;
mod npm_registry;
mod overhead;
mod provider_authoring;
mod provider_grants;
mod provider_scaffold;
mod providers;
mod python_dependencies;
mod python_sdk;
mod queue;
mod queue_retention;
mod records;
mod reference;
mod reference_texts;
mod retention;
mod rust_component;
mod scenarios;
mod serve;
mod serve_bounds;
mod serve_tls;
mod support;
mod terminal;
mod typescript;
mod verification;
