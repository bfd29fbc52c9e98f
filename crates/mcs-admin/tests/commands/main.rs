//! Every mcs-admin command against a real DynamoDB API (moto_server): each
//! test migrates a table of its own, populates it through the registry's
//! own store, runs the built binary and checks what it prints and its exit
//! code. One test binary, one module per command.

// A failed call in a test should fail it loudly, with the value shown.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod describe;
mod diff;
mod doctor;
mod dump_restore;
mod gc;
mod get;
mod ls;
mod migrate;
mod usage;
