//! # rdma-core differential-test oracle
//!
//! rdma-core's mlx5 provider (version [`RDMA_CORE_VERSION`]) is the reference for the
//! mlx5 send-WQE, doorbell and CQE formats. This crate runs the provider's real
//! data-path code with no NIC: a small C shim (`shim/oracle.c`, ours) builds the
//! provider's private objects (`mlx5_context`, `mlx5_qp`, `mlx5_cq`, `mlx5_bf`) in
//! plain memory and calls its functions on them, so ibgda's encoder and parser can be
//! compared byte for byte with what rdma-core produces.
//!
//! ## Building it
//!
//! `bash scripts/rdma-core.sh` fetches rdma-core 56.1 from the Debian archive, checks
//! its SHA-256, and builds the static, position-independent provider under
//! `target/rdma-core/56.1` (about 30 s on 2 cores; a second run does nothing). This
//! crate's `build.rs` finds it there (or at `$IBGDA_RDMA_CORE_DIR`), compiles the shim
//! and sets `cfg(ibgda_oracle)`. Without it the build prints a warning, [`AVAILABLE`]
//! is `false`, only the plain-data types below exist, and the tests report as
//! *ignored*; with `IBGDA_REQUIRE_ORACLE=1` (CI) the build fails instead.
//!
//! Tests that need the oracle follow this pattern, so they are ignored, never passed,
//! without it:
//!
//! ```text
//! #[test]
//! #[cfg_attr(not(ibgda_oracle), ignore = "rdma-core oracle not built: run scripts/rdma-core.sh")]
//! fn my_test() {
//!     #[cfg(ibgda_oracle)]
//!     checks::my_test();
//! }
//! ```
//!
//! ## What it offers
//!
//! * Level 1, the headers: [`layouts`] (`sizeof`/`offsetof` of every field of the WQE
//!   segments, the AV and the CQEs), [`constants`] (opcodes, flags, syndromes, verbs
//!   values), and the `mlx5dv.h` inline encoders ([`set_ctrl_seg`], [`set_data_seg`],
//!   [`set_dgram_seg`], [`cqe_owner`], [`cqe_se`], [`cqe_format`], [`cqe_opcode`]).
//! * Level 2, the provider: [`OracleQp::post`] drives `mlx5_post_send`
//!   ([`PostPath::Classic`]) or the `ibv_wr_*` builders ([`PostPath::Extended`]) for
//!   RDMA WRITE (with immediate), READ, compare-and-swap, fetch-and-add, with SGEs or
//!   inline data, on RC or (extended only) DCI, and returns the ring, the mask of bytes
//!   written, the doorbell record, the doorbell or BlueFlame copy, and the producer
//!   counter ([`Posted`]). [`OracleQp::poll_cq`] feeds raw 64-byte CQEs to
//!   `mlx5_poll_cq` and returns every `ibv_wc` field the provider stored ([`Polled`]).
//!
//! ## DC
//!
//! * Classic path: `mlx5_post_send` has no case for `IBV_QPT_DRIVER`: a DCI WQE would
//!   get neither the address vector nor the remote-address segment (just ctrl + data).
//!   [`OracleQp::post`] refuses it ([`OracleError::ClassicDc`]).
//! * Extended path: `mlx5dv_wr_set_dc_addr` copies the AH's 48-byte `av` after the
//!   control segment, ORs `htobe32(dctn | MLX5_EXTENDED_UD_AV)` into `dqp_dct` and
//!   stores `htobe64(dc_key)`. The AH comes from the real `mlx5_create_ah` for an
//!   InfiniBand port ([`AddressVector::Ib`]: LID, SL, source path bits, static rate,
//!   and GRH) or from bytes given by the caller ([`AddressVector::Raw`], e.g. RoCE,
//!   whose `mlx5_create_ah` needs sysfs and a kernel call).
//!
//! ## Provider quirks an exact comparison must encode
//!
//! Each is exercised by `tests/smoke.rs`; `classic_and_extended_differ_only_by_quirks`
//! checks that quirks 1 and 5 are the *only* differences between the two posting paths
//! over random RC requests.
//!
//! Send side (rdma-core 56.1):
//! 1. **`ctrl.imm`** (bytes 12..16): the classic path always stores it (0 unless
//!    WRITE_WITH_IMM); the extended path stores it only for WRITE_WITH_IMM (and the SEND
//!    variants): for WRITE, READ and atomics it is left as it was.
//! 2. **Bytes 8..12 of the control segment** (signature, `dci_stream_channel_id`,
//!    `fm_ce_se`) are zeroed with one 32-bit store on both paths before `fm_ce_se` is
//!    set. Only `MLX5_WQE_CTRL_FENCE` (0x80, "small and fence") and
//!    `MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE` (0x20) exist in rdma-core; other fence
//!    modes are kernel-only names.
//! 3. **Inline padding** after the payload up to the 16-byte boundary is never written.
//! 4. **`atomic.compare`** is not written for fetch-and-add (either path).
//! 5. **Atomic data segment byte count**: the classic path forces it to 8 whatever the
//!    SGE length; the extended `ibv_wr_set_sge` passes the given length through.
//! 6. **Zero-length SGEs** are skipped (no data segment, no DS) on both paths; a
//!    zero-length inline payload writes no inline header and adds no DS, but still
//!    counts as inline for BlueFlame.
//! 7. **Doorbell**: the 8 bytes stored are bytes 0..8 of the *last* WQE's real control
//!    segment (its start index, opcode, QPN and DS), not a synthetic `{pi, qpn}` word.
//!    The doorbell record holds `cur_post & 0xffff` (the next free WQEBB), big-endian;
//!    the receive counter is never touched.
//! 8. **BlueFlame**: the whole WQE (whole 64-byte blocks, following the ring wrap,
//!    including never-written padding) is copied instead of the 8-byte doorbell when one
//!    WQE was posted, the register has `bf_buf_size > 0`, the WQE was inline (or
//!    `prefer_bf`), DS > 1, DS <= `bf_buf_size / 16`, and not `shut_up_bf`.
//!    `bf->offset` toggles between 0 and `bf_buf_size` after every doorbell.
//! 9. **Errors** (ENOMEM for a full queue, too many SGEs, inline too long): classic
//!    posts stop at the failing WR k and ring for WRs 0..k, **but with the failing WR's
//!    control segment**: its bytes 0..8 are not written yet, so the doorbell (or
//!    BlueFlame copy, when an earlier WR was inline and k = 1) carries that slot's stale
//!    bytes ([`Posted::stale_doorbell`]); bytes 8..16 and the segments written before
//!    the failure are left in the ring. Extended posts roll `cur_post` back and ring
//!    nothing (the ring keeps what the builders wrote).
//! 10. **Classic DC**: `mlx5_post_send` has no DCI case (see "DC" above).
//!
//! Completion side (`mlx5_poll_cq`):
//! 11. **Fields not stored** keep the caller's values ([`WorkCompletion`]'s `None`):
//!     requester completions store `wr_id`, `status`, `opcode`, `qp_num`, `wc_flags`
//!     (`IBV_WC_WITH_IMM` for WRITE_WITH_IMM), and `byte_len` only for READ (from the
//!     CQE) and atomics (always 8); error completions store `wr_id`, `status`,
//!     `vendor_err`, `qp_num`, `wc_flags` (0), never `opcode` or `byte_len`.
//! 12. **Responder completions** take `pkey_index` from the low 16 bits of
//!     `imm_inval_pkey` whatever the opcode (the immediate on RC), `sl` from
//!     `flags_rqpn` bits 27..24, GRH from bits 29..28, and consume receive WQE
//!     `wqe_counter mod rq_wqes`.
//! 13. **Syndromes**: unknown ones map to `IBV_WC_GENERAL_ERR`.
//! 14. **Poll errors**: a CQE naming an unknown QP (by QPN, or by user index with CQE
//!     version 1; or, with version 0, a responder CQE with a nonzero SRQN) makes
//!     `mlx5_poll_cq` return `CQ_POLL_ERR`, dropping the count of completions it had
//!     already filled; the failing CQE is consumed ([`Polled::poll_error`]).
//! 15. **Scatter-to-CQE**: CQEs with `op_own & 0xc` on opcodes 0..=4 make the provider
//!     copy data to addresses taken from WQEs; the oracle refuses them
//!     ([`OracleError::ScatterCqe`]). Error CQEs with those bits are fine.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

/// Whether the rdma-core oracle was built and linked into this crate.
pub const AVAILABLE: bool = cfg!(ibgda_oracle);

/// The rdma-core release the oracle runs.
pub const RDMA_CORE_VERSION: &str = "56.1";

mod request;
pub use request::*;

pub mod verbs;

#[cfg(ibgda_oracle)]
mod ffi;

#[cfg(ibgda_oracle)]
mod headers;
#[cfg(ibgda_oracle)]
pub use headers::*;

#[cfg(ibgda_oracle)]
pub mod prm;

#[cfg(ibgda_oracle)]
pub mod roce;

#[cfg(ibgda_oracle)]
mod qp;
#[cfg(ibgda_oracle)]
pub use qp::*;
