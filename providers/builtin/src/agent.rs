//! Agent Run (`https://jig.md/contracts/agent-run` 1.0.0, HOST-FACTS §1 and §6).
