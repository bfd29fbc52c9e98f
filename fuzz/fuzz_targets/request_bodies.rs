//! Every JSON body the server parses, parsed as the server does: never a
//! panic, and what is accepted round-trips.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcs_api::{ClusterRegistration, ExportRequest, PoolRegistration, RouterRegistration};
use mcs_fuzz::body_round_trips;

fuzz_target!(|data: &[u8]| {
    body_round_trips::<PoolRegistration>(data);
    body_round_trips::<RouterRegistration>(data);
    body_round_trips::<ClusterRegistration>(data);
    body_round_trips::<ExportRequest>(data);
});
