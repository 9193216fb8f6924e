//! Completion queues: 64-byte CQE views, syndromes, and conversion to verbs-style
//! completion statuses.

mod cqe;

pub use cqe::{
    parse_cqe, Completion, CompletionStatus, Cqe64, CqeError, CqeOpcode, ErrorCompletion,
    ErrorCqe64, RequesterCompletion, ResponderCompletion, Syndrome, WcOpcode, WorkCompletion,
    CQE_BYTES, WC_GRH, WC_WITH_IMM, WC_WITH_INV,
};

mod poll;
pub use poll::{CompletionQueue, CqMode};
