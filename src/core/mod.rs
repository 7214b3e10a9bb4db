//! The request pipeline between host faces and upstreams: the gateway's shared state ([`hub`]),
//! method routing, forwarded calls and their frames, and the bridges between the two protocol eras.

pub mod forward;
pub mod hub;
pub mod input_bridge;
pub mod input_required;
pub mod request_state;
pub mod router;
