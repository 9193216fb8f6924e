//! The emulated ConnectX's C structures (`emu/src/abi.rs`) against rdma-core 56.1's
//! installed `verbs.h` and `mlx5dv.h` as the C compiler lays them out: every structure's
//! size and alignment, and the offset and size of every member the shim lists (for
//! `ibv_context_ops`, `verbs_context` and `mlx5dv_context`, the members the emulator sets).
//!
//! Without the rdma-core build the test is reported as ignored (never passed).

#[test]
#[cfg_attr(
    not(ibgda_oracle),
    ignore = "rdma-core oracle not built: run scripts/rdma-core.sh"
)]
fn emulator_structures_match_rdma_core() {
    #[cfg(ibgda_oracle)]
    checks::emulator_structures_match_rdma_core();
}

/// The emulator's definitions, compiled here as they are there (the crate itself is a
/// library of C entry points that would clash with rdma-core's, linked into this test).
#[cfg(ibgda_oracle)]
#[allow(dead_code)]
#[path = "../../../emu/src/abi.rs"]
mod abi;

#[cfg(ibgda_oracle)]
mod checks {
    use core::mem::{align_of, size_of, MaybeUninit};

    use super::abi::*;
    use ibgda_rdma_core_oracle::verbs_layouts;

    /// `size_of` the pointee of a raw pointer to a member.
    fn pointee<T>(_: *const T) -> usize {
        size_of::<T>()
    }

    /// One Rust structure: its C name, size, alignment and `(C member, offset, size)`.
    struct Rust {
        name: &'static str,
        size: usize,
        align: usize,
        fields: Vec<(&'static str, usize, usize)>,
    }

    macro_rules! rust {
        ($ty:ty, $c:literal, [$($field:ident $(= $cname:literal)?),* $(,)?]) => {{
            let value = MaybeUninit::<$ty>::uninit();
            let base = value.as_ptr();
            Rust {
                name: $c,
                size: size_of::<$ty>(),
                align: align_of::<$ty>(),
                fields: vec![$(
                    (
                        rust!(@name $field $($cname)?),
                        core::mem::offset_of!($ty, $field),
                        // SAFETY: only the member's address is formed, never read.
                        pointee(unsafe { core::ptr::addr_of!((*base).$field) }),
                    ),
                )*],
            }
        }};
        (@name $field:ident) => { stringify!($field) };
        (@name $field:ident $cname:literal) => { $cname };
    }

    /// `outer` with the members of its member structures `inner` (each named by the member
    /// it is) as dotted members at their offsets in `outer`.
    fn nested<const N: usize>(mut outer: Rust, inner: [Rust; N]) -> Rust {
        for member in inner {
            let base = outer
                .fields
                .iter()
                .find(|(name, _, _)| *name == member.name)
                .map(|(_, offset, _)| *offset)
                .expect("the nested member is a member of the outer structure");
            for (name, offset, size) in member.fields {
                let dotted: &'static str =
                    Box::leak(format!("{}.{name}", member.name).into_boxed_str());
                outer.fields.push((dotted, base + offset, size));
            }
        }
        outer
    }

    pub fn emulator_structures_match_rdma_core() {
        let ours = [
            rust!(
                ibv_device,
                "ibv_device",
                [
                    _ops,
                    node_type,
                    transport_type,
                    name,
                    dev_name,
                    dev_path,
                    ibdev_path
                ]
            ),
            rust!(
                ibv_context_ops,
                "ibv_context_ops",
                [
                    _compat_query_device,
                    poll_cq,
                    req_notify_cq,
                    post_srq_recv,
                    post_send,
                    post_recv,
                    _compat_async_event
                ]
            ),
            rust!(
                ibv_context,
                "ibv_context",
                [
                    device,
                    ops,
                    cmd_fd,
                    async_fd,
                    num_comp_vectors,
                    mutex,
                    abi_compat
                ]
            ),
            rust!(
                verbs_context,
                "verbs_context",
                [
                    query_port,
                    create_cq_ex,
                    priv_ = "priv",
                    query_device_ex,
                    close_xrcd,
                    sz,
                    context
                ]
            ),
            rust!(
                ibv_device_attr,
                "ibv_device_attr",
                [
                    fw_ver,
                    node_guid,
                    sys_image_guid,
                    max_mr_size,
                    page_size_cap,
                    vendor_id,
                    vendor_part_id,
                    hw_ver,
                    max_qp,
                    max_qp_wr,
                    device_cap_flags,
                    max_sge,
                    max_sge_rd,
                    max_cq,
                    max_cqe,
                    max_mr,
                    max_pd,
                    max_qp_rd_atom,
                    max_ee_rd_atom,
                    max_res_rd_atom,
                    max_qp_init_rd_atom,
                    max_ee_init_rd_atom,
                    atomic_cap,
                    max_ee,
                    max_rdd,
                    max_mw,
                    max_raw_ipv6_qp,
                    max_raw_ethy_qp,
                    max_mcast_grp,
                    max_mcast_qp_attach,
                    max_total_mcast_qp_attach,
                    max_ah,
                    max_fmr,
                    max_map_per_fmr,
                    max_srq,
                    max_srq_wr,
                    max_srq_sge,
                    max_pkeys,
                    local_ca_ack_delay,
                    phys_port_cnt,
                ]
            ),
            rust!(
                ibv_device_attr_ex,
                "ibv_device_attr_ex",
                [
                    orig_attr,
                    comp_mask,
                    odp_caps,
                    completion_timestamp_mask,
                    hca_core_clock,
                    device_cap_flags_ex,
                    tso_caps,
                    rss_caps,
                    max_wq_type_rq,
                    packet_pacing_caps,
                    raw_packet_caps,
                    tm_caps,
                    cq_mod_caps,
                    max_dm_size,
                    pci_atomic_caps,
                    xrc_odp_caps,
                    phys_port_cnt_ex,
                ]
            ),
            rust!(
                ibv_port_attr,
                "ibv_port_attr",
                [
                    state,
                    max_mtu,
                    active_mtu,
                    gid_tbl_len,
                    port_cap_flags,
                    max_msg_sz,
                    bad_pkey_cntr,
                    qkey_viol_cntr,
                    pkey_tbl_len,
                    lid,
                    sm_lid,
                    lmc,
                    max_vl_num,
                    sm_sl,
                    subnet_timeout,
                    init_type_reply,
                    active_width,
                    active_speed,
                    phys_state,
                    link_layer,
                    flags,
                    port_cap_flags2,
                    active_speed_ex,
                ]
            ),
            rust!(
                ibv_gid_entry,
                "ibv_gid_entry",
                [gid, gid_index, port_num, gid_type, ndev_ifindex]
            ),
            rust!(ibv_pd, "ibv_pd", [context, handle]),
            rust!(
                ibv_mr,
                "ibv_mr",
                [context, pd, addr, length, handle, lkey, rkey]
            ),
            rust!(
                ibv_global_route,
                "ibv_global_route",
                [dgid, flow_label, sgid_index, hop_limit, traffic_class]
            ),
            rust!(
                ibv_ah_attr,
                "ibv_ah_attr",
                [
                    grh,
                    dlid,
                    sl,
                    src_path_bits,
                    static_rate,
                    is_global,
                    port_num
                ]
            ),
            rust!(ibv_ah, "ibv_ah", [context, pd, handle]),
            rust!(
                ibv_cq,
                "ibv_cq",
                [
                    context,
                    channel,
                    cq_context,
                    handle,
                    cqe,
                    mutex,
                    cond,
                    comp_events_completed,
                    async_events_completed
                ]
            ),
            rust!(
                ibv_srq,
                "ibv_srq",
                [
                    context,
                    srq_context,
                    pd,
                    handle,
                    mutex,
                    cond,
                    events_completed
                ]
            ),
            rust!(
                ibv_qp,
                "ibv_qp",
                [
                    context,
                    qp_context,
                    pd,
                    send_cq,
                    recv_cq,
                    srq,
                    handle,
                    qp_num,
                    state,
                    qp_type,
                    mutex,
                    cond,
                    events_completed
                ]
            ),
            rust!(ibv_sge, "ibv_sge", [addr, length, lkey]),
            rust!(ibv_recv_wr, "ibv_recv_wr", [wr_id, next, sg_list, num_sge]),
            rust!(
                mlx5dv_context_attr,
                "mlx5dv_context_attr",
                [flags, comp_mask]
            ),
            rust!(
                mlx5dv_obj,
                "mlx5dv_obj",
                [qp, cq, srq, rwq, dm, ah, pd, devx]
            ),
            rust!(mlx5dv_pd, "mlx5dv_pd", [pdn, comp_mask]),
            rust!(mlx5dv_ah, "mlx5dv_ah", [av, comp_mask]),
            rust!(mlx5dv_devx_umem, "mlx5dv_devx_umem", [umem_id]),
            rust!(
                mlx5dv_devx_umem_in,
                "mlx5dv_devx_umem_in",
                [addr, size, access, pgsz_bitmap, comp_mask, dmabuf_fd]
            ),
            rust!(
                mlx5dv_devx_uar,
                "mlx5dv_devx_uar",
                [reg_addr, base_addr, page_id, mmap_off, comp_mask]
            ),
            rust!(
                ibv_parent_domain_init_attr,
                "ibv_parent_domain_init_attr",
                [pd, td, comp_mask, alloc, free, pd_context]
            ),
            rust!(
                ibv_qp_cap,
                "ibv_qp_cap",
                [
                    max_send_wr,
                    max_recv_wr,
                    max_send_sge,
                    max_recv_sge,
                    max_inline_data
                ]
            ),
            nested(
                rust!(ibv_srq_init_attr, "ibv_srq_init_attr", [srq_context, attr]),
                [rust!(ibv_srq_attr, "attr", [max_wr, max_sge, srq_limit])],
            ),
            rust!(
                ibv_qp_init_attr_ex,
                "ibv_qp_init_attr_ex",
                [
                    qp_context,
                    send_cq,
                    recv_cq,
                    srq,
                    cap,
                    qp_type,
                    sq_sig_all,
                    comp_mask,
                    pd,
                    xrcd,
                    create_flags,
                    max_tso_header,
                    rwq_ind_tbl,
                    rx_hash_conf,
                    source_qpn,
                    send_ops_flags,
                ]
            ),
            rust!(
                ibv_qp_attr,
                "ibv_qp_attr",
                [
                    qp_state,
                    cur_qp_state,
                    path_mtu,
                    path_mig_state,
                    qkey,
                    rq_psn,
                    sq_psn,
                    dest_qp_num,
                    qp_access_flags,
                    cap,
                    ah_attr,
                    alt_ah_attr,
                    pkey_index,
                    alt_pkey_index,
                    en_sqd_async_notify,
                    sq_draining,
                    max_rd_atomic,
                    max_dest_rd_atomic,
                    min_rnr_timer,
                    port_num,
                    timeout,
                    retry_cnt,
                    rnr_retry,
                    alt_port_num,
                    alt_timeout,
                    rate_limit,
                ]
            ),
            nested(
                rust!(
                    mlx5dv_qp_init_attr,
                    "mlx5dv_qp_init_attr",
                    [comp_mask, create_flags, dc_init_attr, send_ops_flags]
                ),
                [rust!(
                    mlx5dv_dc_init_attr,
                    "dc_init_attr",
                    [dc_type, dct_access_key]
                )],
            ),
            rust!(
                mlx5dv_cq,
                "mlx5dv_cq",
                [buf, dbrec, cqe_cnt, cqe_size, cq_uar, cqn, comp_mask]
            ),
            rust!(
                mlx5dv_srq,
                "mlx5dv_srq",
                [buf, dbrec, stride, head, tail, comp_mask, srqn]
            ),
        ];
        // `mlx5dv_context_head` is the prefix of `struct mlx5dv_context` the emulator
        // writes: its members, not its size.
        let head = rust!(
            mlx5dv_context_head,
            "mlx5dv_context",
            [version, flags, comp_mask]
        );
        let theirs = verbs_layouts();
        let mut compared = 0;
        for rust in ours.iter().chain(core::iter::once(&head)) {
            let c = theirs
                .iter()
                .find(|l| l.name == rust.name)
                .unwrap_or_else(|| panic!("the shim has no layout of {}", rust.name));
            if rust.name != "mlx5dv_context" {
                assert_eq!(rust.size, c.size, "sizeof(struct {})", rust.name);
                assert_eq!(rust.align, c.align, "_Alignof(struct {})", rust.name);
            }
            assert_eq!(
                rust.fields.len(),
                c.fields.len(),
                "members of {} compared",
                rust.name
            );
            for (name, offset, size) in &rust.fields {
                let member = c.field(name).unwrap_or_else(|| {
                    panic!("struct {} has no member {name} in the shim", rust.name)
                });
                assert_eq!(
                    *offset, member.offset,
                    "offsetof(struct {}, {name})",
                    rust.name
                );
                assert_eq!(*size, member.size, "sizeof(struct {}.{name})", rust.name);
                compared += 1;
            }
        }
        assert_eq!(
            theirs.len(),
            ours.len() + 1,
            "every shim layout is compared"
        );
        // The exported ibv_query_port fills rdma-core's `_compat_ibv_port_attr`: up to
        // `flags`.
        let port = theirs
            .iter()
            .find(|l| l.name == "ibv_port_attr")
            .expect("port layout");
        let flags = port.field("flags").expect("flags");
        assert_eq!(COMPAT_PORT_ATTR_BYTES, flags.offset + flags.size);
        eprintln!(
            "oracle: emulator_structures_match_rdma_core: {} structures, {compared} members",
            theirs.len()
        );
    }
}
