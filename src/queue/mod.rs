//! Queues. Transports are defined with the WQE shapes they decide and re-exported here.
pub use crate::wqe::{
    AnyTransport, Compact, Dc, Full, Rc, Transport, TransportKind, TypedTransport,
};
