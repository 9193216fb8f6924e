//! Entry points the emulated ConnectX exports but does not implement. Each fails loudly:
//! it prints `ibgda-emu: NAME: not implemented ...` and reports `EOPNOTSUPP` the way the
//! real function reports a failure (NULL, an errno, or -1), so a program that reaches one
//! stops with a message naming it instead of misbehaving silently.
//!
//! They take no declared arguments: on x86-64 a non-variadic C call passes its arguments
//! in registers and on the caller's stack, which a callee that reads none leaves alone.
//!
//! The list: what rdma-mummy-sys's loader shim and NVSHMEM's IBGDA transport look up, and
//! one entry point of every rdma-core symbol version the others need, so that `dlvsym`
//! finds every version node rdma-core 56.1 defines up to the ones used.

use core::ffi::{c_int, c_void};

use crate::abi::{ibv_cq, ibv_qp, ibv_recv_wr};
use crate::entry::{self, not_implemented};

macro_rules! returning_null {
    ($($name:ident),* $(,)?) => {$(
        #[no_mangle]
        pub extern "C" fn $name() -> *mut c_void {
            entry::pointer(stringify!($name), |_| Err(not_implemented()))
        }
    )*};
}

macro_rules! returning_errno {
    ($($name:ident),* $(,)?) => {$(
        #[no_mangle]
        pub extern "C" fn $name() -> c_int {
            entry::status(stringify!($name), |_| Err(not_implemented()))
        }
    )*};
}

macro_rules! returning_minus_one {
    ($($name:ident),* $(,)?) => {$(
        #[no_mangle]
        pub extern "C" fn $name() -> c_int {
            entry::minus_one(stringify!($name), |_| Err(not_implemented()))
        }
    )*};
}

macro_rules! returning_nothing {
    ($($name:ident),* $(,)?) => {$(
        #[no_mangle]
        pub extern "C" fn $name() {
            entry::run(stringify!($name), |_| (), |_| Err::<(), _>(not_implemented()))
        }
    )*};
}

returning_null!(
    ibv_create_comp_channel,
    ibv_create_qp,
    ibv_create_ah_from_wc,
    ibv_qp_to_qp_ex,
    ibv_import_device,
    mlx5dv_create_cq,
    mlx5dv_create_wq,
    mlx5dv_create_flow_action_esp,
    mlx5dv_create_flow_matcher,
    mlx5dv_devx_create_cmd_comp,
    mlx5dv_alloc_dm,
    mlx5dv_devx_create_event_channel,
    mlx5dv_alloc_var,
    mlx5dv_pp_alloc,
    mlx5dv_dr_action_create_dest_devx_tir,
    mlx5dv_dr_action_create_flow_sampler,
    mlx5dv_sched_node_create,
    mlx5dv_reserved_qpn_alloc,
    mlx5dv_qp_ex_from_ibv_qp_ex,
    mlx5dv_dek_create,
    mlx5dv_dr_action_create_dest_ib_port,
    mlx5dv_devx_create_eq,
    mlx5dv_create_steering_anchor,
    mlx5dv_reg_dmabuf_mr,
);

returning_errno!(
    ibv_destroy_comp_channel,
    ibv_resize_cq,
    ibv_modify_srq,
    ibv_query_srq,
    ibv_query_qp,
    ibv_attach_mcast,
    ibv_detach_mcast,
    ibv_init_ah_from_wc,
    ibv_resolve_eth_l2_from_gid,
    ibv_rereg_mr,
    ibv_set_ece,
    ibv_query_ece,
    ibv_query_qp_data_in_order,
    mlx5dv_set_context_attr,
    mlx5dv_get_clock_info,
    mlx5dv_devx_qp_modify,
    mlx5dv_devx_qp_query,
    mlx5dv_devx_obj_query_async,
    mlx5dv_devx_subscribe_devx_event,
    mlx5dv_modify_qp_lag_port,
    mlx5dv_query_qp_lag_port,
    mlx5dv_modify_qp_udp_sport,
    mlx5dv_dm_map_op_addr,
    _mlx5dv_query_port,
    mlx5dv_map_ah_to_qp,
    mlx5dv_dci_stream_id_reset,
    mlx5dv_dr_aso_other_domain_link,
);

returning_minus_one!(
    ibv_get_async_event,
    ibv_get_cq_event,
    ibv_rate_to_mult,
    mult_to_ibv_rate,
    ibv_rate_to_mbps,
    mbps_to_ibv_rate,
);

returning_nothing!(ibv_ack_async_event, ibv_ack_cq_events);

// The data-path operations of `struct ibv_context_ops`, which the static-inline
// `ibv_poll_cq`, `ibv_req_notify_cq`, `ibv_post_send` and `ibv_post_recv` call: verbs CQs
// and DC targets exist (`queues`), but polling them, posting receives to queue pairs and
// sending on verbs queue pairs are not implemented (`ibv_post_srq_recv` is, in `queues`).

pub(crate) unsafe extern "C" fn op_poll_cq(_: *mut ibv_cq, _: c_int, _: *mut c_void) -> c_int {
    entry::minus_one("ibv_poll_cq", |_| Err(not_implemented()))
}

pub(crate) unsafe extern "C" fn op_req_notify_cq(_: *mut ibv_cq, _: c_int) -> c_int {
    entry::status("ibv_req_notify_cq", |_| Err(not_implemented()))
}

pub(crate) unsafe extern "C" fn op_post_send(
    _: *mut ibv_qp,
    _: *mut c_void,
    _: *mut *mut c_void,
) -> c_int {
    entry::status("ibv_post_send", |_| Err(not_implemented()))
}

pub(crate) unsafe extern "C" fn op_post_recv(
    _: *mut ibv_qp,
    _: *mut ibv_recv_wr,
    _: *mut *mut ibv_recv_wr,
) -> c_int {
    entry::status("ibv_post_recv", |_| Err(not_implemented()))
}
