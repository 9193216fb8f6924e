//! The control plane: how queues come to exist on a NIC.
//!
//! Everything above this module (WQE builders, typed queues, ordering scopes) works on queues
//! it is handed. This module is the one way to obtain them, whatever the NIC:
//!
//! - [`prm`]: the mlx5 PRM commands (QUERY_HCA_CAP, ALLOC_UAR, CREATE_CQ, CREATE_QP, the
//!   RST -> INIT -> RTR -> RTS transitions, CREATE_DCT, DESTROY_*) as typed plain values
//!   with byte-exact encoders and decoders over big-endian bit-field layouts. The mlx5
//!   backend sends these bytes through DEVX; the software NIC executes the same bytes by
//!   decoding them, so the command encoding runs end to end without hardware.
pub mod prm;
