//! The libibverbs values a [`crate::WorkCompletion`] carries (rdma-core 56.1,
//! `libibverbs/verbs.h`). The smoke test checks each against the C headers.

/// `IBV_WC_SUCCESS`.
pub const WC_SUCCESS: u32 = 0;
/// `IBV_WC_LOC_LEN_ERR`.
pub const WC_LOC_LEN_ERR: u32 = 1;
/// `IBV_WC_LOC_QP_OP_ERR`.
pub const WC_LOC_QP_OP_ERR: u32 = 2;
/// `IBV_WC_LOC_PROT_ERR`.
pub const WC_LOC_PROT_ERR: u32 = 4;
/// `IBV_WC_WR_FLUSH_ERR`.
pub const WC_WR_FLUSH_ERR: u32 = 5;
/// `IBV_WC_MW_BIND_ERR`.
pub const WC_MW_BIND_ERR: u32 = 6;
/// `IBV_WC_BAD_RESP_ERR`.
pub const WC_BAD_RESP_ERR: u32 = 7;
/// `IBV_WC_LOC_ACCESS_ERR`.
pub const WC_LOC_ACCESS_ERR: u32 = 8;
/// `IBV_WC_REM_INV_REQ_ERR`.
pub const WC_REM_INV_REQ_ERR: u32 = 9;
/// `IBV_WC_REM_ACCESS_ERR`.
pub const WC_REM_ACCESS_ERR: u32 = 10;
/// `IBV_WC_REM_OP_ERR`.
pub const WC_REM_OP_ERR: u32 = 11;
/// `IBV_WC_RETRY_EXC_ERR`.
pub const WC_RETRY_EXC_ERR: u32 = 12;
/// `IBV_WC_RNR_RETRY_EXC_ERR`.
pub const WC_RNR_RETRY_EXC_ERR: u32 = 13;
/// `IBV_WC_REM_ABORT_ERR`.
pub const WC_REM_ABORT_ERR: u32 = 16;
/// `IBV_WC_GENERAL_ERR`: what the provider maps every unknown syndrome to.
pub const WC_GENERAL_ERR: u32 = 21;

/// `IBV_WC_SEND`.
pub const WC_SEND: u32 = 0;
/// `IBV_WC_RDMA_WRITE`.
pub const WC_RDMA_WRITE: u32 = 1;
/// `IBV_WC_RDMA_READ`.
pub const WC_RDMA_READ: u32 = 2;
/// `IBV_WC_COMP_SWAP`.
pub const WC_COMP_SWAP: u32 = 3;
/// `IBV_WC_FETCH_ADD`.
pub const WC_FETCH_ADD: u32 = 4;
/// `IBV_WC_RECV`.
pub const WC_RECV: u32 = 1 << 7;
/// `IBV_WC_RECV_RDMA_WITH_IMM`.
pub const WC_RECV_RDMA_WITH_IMM: u32 = (1 << 7) + 1;

/// `IBV_WC_GRH`.
pub const WC_GRH: u32 = 1 << 0;
/// `IBV_WC_WITH_IMM`.
pub const WC_WITH_IMM: u32 = 1 << 1;
/// `IBV_WC_WITH_INV`.
pub const WC_WITH_INV: u32 = 1 << 3;

/// Every constant above with its C name, for checking against the headers.
pub const ALL: &[(&str, u32)] = &[
    ("IBV_WC_SUCCESS", WC_SUCCESS),
    ("IBV_WC_LOC_LEN_ERR", WC_LOC_LEN_ERR),
    ("IBV_WC_LOC_QP_OP_ERR", WC_LOC_QP_OP_ERR),
    ("IBV_WC_LOC_PROT_ERR", WC_LOC_PROT_ERR),
    ("IBV_WC_WR_FLUSH_ERR", WC_WR_FLUSH_ERR),
    ("IBV_WC_MW_BIND_ERR", WC_MW_BIND_ERR),
    ("IBV_WC_BAD_RESP_ERR", WC_BAD_RESP_ERR),
    ("IBV_WC_LOC_ACCESS_ERR", WC_LOC_ACCESS_ERR),
    ("IBV_WC_REM_INV_REQ_ERR", WC_REM_INV_REQ_ERR),
    ("IBV_WC_REM_ACCESS_ERR", WC_REM_ACCESS_ERR),
    ("IBV_WC_REM_OP_ERR", WC_REM_OP_ERR),
    ("IBV_WC_RETRY_EXC_ERR", WC_RETRY_EXC_ERR),
    ("IBV_WC_RNR_RETRY_EXC_ERR", WC_RNR_RETRY_EXC_ERR),
    ("IBV_WC_REM_ABORT_ERR", WC_REM_ABORT_ERR),
    ("IBV_WC_GENERAL_ERR", WC_GENERAL_ERR),
    ("IBV_WC_SEND", WC_SEND),
    ("IBV_WC_RDMA_WRITE", WC_RDMA_WRITE),
    ("IBV_WC_RDMA_READ", WC_RDMA_READ),
    ("IBV_WC_COMP_SWAP", WC_COMP_SWAP),
    ("IBV_WC_FETCH_ADD", WC_FETCH_ADD),
    ("IBV_WC_RECV", WC_RECV),
    ("IBV_WC_RECV_RDMA_WITH_IMM", WC_RECV_RDMA_WITH_IMM),
    ("IBV_WC_GRH", WC_GRH),
    ("IBV_WC_WITH_IMM", WC_WITH_IMM),
    ("IBV_WC_WITH_INV", WC_WITH_INV),
];
