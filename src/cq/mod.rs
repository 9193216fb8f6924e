//! Completion queues: 64-byte CQE views, syndromes, and conversion to verbs-style
//! completion statuses.

mod cqe;

pub use cqe::{
    parse_cqe, Completion, CompletionStatus, Cqe64, CqeError, CqeOpcode, ErrorCompletion,
    ErrorCqe64, RequesterCompletion, ResponderCompletion, Syndrome, WcOpcode, WorkCompletion,
    CQE_BYTES, WC_WITH_IMM,
};

mod poll;
pub use poll::{CompletionQueue, CqMode};
