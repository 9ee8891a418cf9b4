//! arbiter-wire: the control plane's protocol, both sides of it, in one place.
//!
//! - [`api`], [`work_api`] and [`plan_api`]: the JSON bodies of the routes (workers and
//!   tokens, the work protocol, plan administration): one definition per message, used by
//!   the server's routes and by the clients alike, so the two sides cannot drift; each is
//!   round-trip tested with generated values.
//! - [`client`]: the HTTP client (`arbiter worker register|list|revoke|rotate`);
//!   [`work_client`]: a remote worker's coordinator over the work protocol;
//!   [`plan_client`]: plan administration on a control plane.
//!
//! See `docs/protocol.md` for every route, its auth, limits and errors.

#![forbid(unsafe_code)]

pub mod api;
pub mod client;
pub mod plan_api;
pub mod plan_client;
pub mod work_api;
pub mod work_client;
