//! Run Checkpoint (`https://jig.md/contracts/run-checkpoint` 1.0.0, HOST-FACTS §3).
