//! Project Command (`https://jig.md/contracts/project-command` 1.0.0, HOST-FACTS §2, seed 003).
