//! Every query string the server parses, parsed as the server does: never a
//! panic, and what is accepted round-trips.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcs_api::{ListQuery, Withdrawal};
use mcs_fuzz::query_round_trips;

fuzz_target!(|data: &[u8]| {
    query_round_trips::<ListQuery>(data);
    query_round_trips::<Withdrawal>(data);
});
