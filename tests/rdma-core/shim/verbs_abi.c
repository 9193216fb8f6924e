/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * ibgda: the layouts of rdma-core's public verbs and mlx5dv structures that the
 * emulated ConnectX (emu/) hands to C or fills, as the C compiler sees them in
 * rdma-core 56.1's installed headers (sizeof, _Alignof, offsetof and sizeof of
 * each member), for tests/emu_abi.rs to compare with emu's Rust definitions.
 */
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>
#include <infiniband/mlx5dv.h>

#include "oracle.h"

static const struct ibgda_oracle_field device_fields[] = {
	FIELD(struct ibv_device, _ops),
	FIELD(struct ibv_device, node_type),
	FIELD(struct ibv_device, transport_type),
	FIELD(struct ibv_device, name),
	FIELD(struct ibv_device, dev_name),
	FIELD(struct ibv_device, dev_path),
	FIELD(struct ibv_device, ibdev_path),
};

static const struct ibgda_oracle_field context_ops_fields[] = {
	FIELD(struct ibv_context_ops, _compat_query_device),
	FIELD(struct ibv_context_ops, poll_cq),
	FIELD(struct ibv_context_ops, req_notify_cq),
	FIELD(struct ibv_context_ops, post_srq_recv),
	FIELD(struct ibv_context_ops, post_send),
	FIELD(struct ibv_context_ops, post_recv),
	FIELD(struct ibv_context_ops, _compat_async_event),
};

static const struct ibgda_oracle_field context_fields[] = {
	FIELD(struct ibv_context, device),
	FIELD(struct ibv_context, ops),
	FIELD(struct ibv_context, cmd_fd),
	FIELD(struct ibv_context, async_fd),
	FIELD(struct ibv_context, num_comp_vectors),
	FIELD(struct ibv_context, mutex),
	FIELD(struct ibv_context, abi_compat),
};

static const struct ibgda_oracle_field verbs_context_fields[] = {
	FIELD(struct verbs_context, query_port),
	FIELD(struct verbs_context, create_cq_ex),
	FIELD(struct verbs_context, priv),
	FIELD(struct verbs_context, query_device_ex),
	FIELD(struct verbs_context, close_xrcd),
	FIELD(struct verbs_context, sz),
	FIELD(struct verbs_context, context),
};

static const struct ibgda_oracle_field device_attr_fields[] = {
	FIELD(struct ibv_device_attr, fw_ver),
	FIELD(struct ibv_device_attr, node_guid),
	FIELD(struct ibv_device_attr, sys_image_guid),
	FIELD(struct ibv_device_attr, max_mr_size),
	FIELD(struct ibv_device_attr, page_size_cap),
	FIELD(struct ibv_device_attr, vendor_id),
	FIELD(struct ibv_device_attr, vendor_part_id),
	FIELD(struct ibv_device_attr, hw_ver),
	FIELD(struct ibv_device_attr, max_qp),
	FIELD(struct ibv_device_attr, max_qp_wr),
	FIELD(struct ibv_device_attr, device_cap_flags),
	FIELD(struct ibv_device_attr, max_sge),
	FIELD(struct ibv_device_attr, max_sge_rd),
	FIELD(struct ibv_device_attr, max_cq),
	FIELD(struct ibv_device_attr, max_cqe),
	FIELD(struct ibv_device_attr, max_mr),
	FIELD(struct ibv_device_attr, max_pd),
	FIELD(struct ibv_device_attr, max_qp_rd_atom),
	FIELD(struct ibv_device_attr, max_ee_rd_atom),
	FIELD(struct ibv_device_attr, max_res_rd_atom),
	FIELD(struct ibv_device_attr, max_qp_init_rd_atom),
	FIELD(struct ibv_device_attr, max_ee_init_rd_atom),
	FIELD(struct ibv_device_attr, atomic_cap),
	FIELD(struct ibv_device_attr, max_ee),
	FIELD(struct ibv_device_attr, max_rdd),
	FIELD(struct ibv_device_attr, max_mw),
	FIELD(struct ibv_device_attr, max_raw_ipv6_qp),
	FIELD(struct ibv_device_attr, max_raw_ethy_qp),
	FIELD(struct ibv_device_attr, max_mcast_grp),
	FIELD(struct ibv_device_attr, max_mcast_qp_attach),
	FIELD(struct ibv_device_attr, max_total_mcast_qp_attach),
	FIELD(struct ibv_device_attr, max_ah),
	FIELD(struct ibv_device_attr, max_fmr),
	FIELD(struct ibv_device_attr, max_map_per_fmr),
	FIELD(struct ibv_device_attr, max_srq),
	FIELD(struct ibv_device_attr, max_srq_wr),
	FIELD(struct ibv_device_attr, max_srq_sge),
	FIELD(struct ibv_device_attr, max_pkeys),
	FIELD(struct ibv_device_attr, local_ca_ack_delay),
	FIELD(struct ibv_device_attr, phys_port_cnt),
};

static const struct ibgda_oracle_field device_attr_ex_fields[] = {
	FIELD(struct ibv_device_attr_ex, orig_attr),
	FIELD(struct ibv_device_attr_ex, comp_mask),
	FIELD(struct ibv_device_attr_ex, odp_caps),
	FIELD(struct ibv_device_attr_ex, completion_timestamp_mask),
	FIELD(struct ibv_device_attr_ex, hca_core_clock),
	FIELD(struct ibv_device_attr_ex, device_cap_flags_ex),
	FIELD(struct ibv_device_attr_ex, tso_caps),
	FIELD(struct ibv_device_attr_ex, rss_caps),
	FIELD(struct ibv_device_attr_ex, max_wq_type_rq),
	FIELD(struct ibv_device_attr_ex, packet_pacing_caps),
	FIELD(struct ibv_device_attr_ex, raw_packet_caps),
	FIELD(struct ibv_device_attr_ex, tm_caps),
	FIELD(struct ibv_device_attr_ex, cq_mod_caps),
	FIELD(struct ibv_device_attr_ex, max_dm_size),
	FIELD(struct ibv_device_attr_ex, pci_atomic_caps),
	FIELD(struct ibv_device_attr_ex, xrc_odp_caps),
	FIELD(struct ibv_device_attr_ex, phys_port_cnt_ex),
};

static const struct ibgda_oracle_field port_attr_fields[] = {
	FIELD(struct ibv_port_attr, state),
	FIELD(struct ibv_port_attr, max_mtu),
	FIELD(struct ibv_port_attr, active_mtu),
	FIELD(struct ibv_port_attr, gid_tbl_len),
	FIELD(struct ibv_port_attr, port_cap_flags),
	FIELD(struct ibv_port_attr, max_msg_sz),
	FIELD(struct ibv_port_attr, bad_pkey_cntr),
	FIELD(struct ibv_port_attr, qkey_viol_cntr),
	FIELD(struct ibv_port_attr, pkey_tbl_len),
	FIELD(struct ibv_port_attr, lid),
	FIELD(struct ibv_port_attr, sm_lid),
	FIELD(struct ibv_port_attr, lmc),
	FIELD(struct ibv_port_attr, max_vl_num),
	FIELD(struct ibv_port_attr, sm_sl),
	FIELD(struct ibv_port_attr, subnet_timeout),
	FIELD(struct ibv_port_attr, init_type_reply),
	FIELD(struct ibv_port_attr, active_width),
	FIELD(struct ibv_port_attr, active_speed),
	FIELD(struct ibv_port_attr, phys_state),
	FIELD(struct ibv_port_attr, link_layer),
	FIELD(struct ibv_port_attr, flags),
	FIELD(struct ibv_port_attr, port_cap_flags2),
	FIELD(struct ibv_port_attr, active_speed_ex),
};

static const struct ibgda_oracle_field gid_entry_fields[] = {
	FIELD(struct ibv_gid_entry, gid),
	FIELD(struct ibv_gid_entry, gid_index),
	FIELD(struct ibv_gid_entry, port_num),
	FIELD(struct ibv_gid_entry, gid_type),
	FIELD(struct ibv_gid_entry, ndev_ifindex),
};

static const struct ibgda_oracle_field pd_fields[] = {
	FIELD(struct ibv_pd, context),
	FIELD(struct ibv_pd, handle),
};

static const struct ibgda_oracle_field mr_fields[] = {
	FIELD(struct ibv_mr, context),
	FIELD(struct ibv_mr, pd),
	FIELD(struct ibv_mr, addr),
	FIELD(struct ibv_mr, length),
	FIELD(struct ibv_mr, handle),
	FIELD(struct ibv_mr, lkey),
	FIELD(struct ibv_mr, rkey),
};

static const struct ibgda_oracle_field global_route_fields[] = {
	FIELD(struct ibv_global_route, dgid),
	FIELD(struct ibv_global_route, flow_label),
	FIELD(struct ibv_global_route, sgid_index),
	FIELD(struct ibv_global_route, hop_limit),
	FIELD(struct ibv_global_route, traffic_class),
};

static const struct ibgda_oracle_field ah_attr_fields[] = {
	FIELD(struct ibv_ah_attr, grh),
	FIELD(struct ibv_ah_attr, dlid),
	FIELD(struct ibv_ah_attr, sl),
	FIELD(struct ibv_ah_attr, src_path_bits),
	FIELD(struct ibv_ah_attr, static_rate),
	FIELD(struct ibv_ah_attr, is_global),
	FIELD(struct ibv_ah_attr, port_num),
};

static const struct ibgda_oracle_field ah_fields[] = {
	FIELD(struct ibv_ah, context),
	FIELD(struct ibv_ah, pd),
	FIELD(struct ibv_ah, handle),
};

static const struct ibgda_oracle_field cq_fields[] = {
	FIELD(struct ibv_cq, context),
	FIELD(struct ibv_cq, channel),
	FIELD(struct ibv_cq, cq_context),
	FIELD(struct ibv_cq, handle),
	FIELD(struct ibv_cq, cqe),
	FIELD(struct ibv_cq, mutex),
	FIELD(struct ibv_cq, cond),
	FIELD(struct ibv_cq, comp_events_completed),
	FIELD(struct ibv_cq, async_events_completed),
};

static const struct ibgda_oracle_field srq_fields[] = {
	FIELD(struct ibv_srq, context),
	FIELD(struct ibv_srq, srq_context),
	FIELD(struct ibv_srq, pd),
	FIELD(struct ibv_srq, handle),
	FIELD(struct ibv_srq, mutex),
	FIELD(struct ibv_srq, cond),
	FIELD(struct ibv_srq, events_completed),
};

static const struct ibgda_oracle_field qp_fields[] = {
	FIELD(struct ibv_qp, context),
	FIELD(struct ibv_qp, qp_context),
	FIELD(struct ibv_qp, pd),
	FIELD(struct ibv_qp, send_cq),
	FIELD(struct ibv_qp, recv_cq),
	FIELD(struct ibv_qp, srq),
	FIELD(struct ibv_qp, handle),
	FIELD(struct ibv_qp, qp_num),
	FIELD(struct ibv_qp, state),
	FIELD(struct ibv_qp, qp_type),
	FIELD(struct ibv_qp, mutex),
	FIELD(struct ibv_qp, cond),
	FIELD(struct ibv_qp, events_completed),
};

static const struct ibgda_oracle_field sge_fields[] = {
	FIELD(struct ibv_sge, addr),
	FIELD(struct ibv_sge, length),
	FIELD(struct ibv_sge, lkey),
};

static const struct ibgda_oracle_field recv_wr_fields[] = {
	FIELD(struct ibv_recv_wr, wr_id),
	FIELD(struct ibv_recv_wr, next),
	FIELD(struct ibv_recv_wr, sg_list),
	FIELD(struct ibv_recv_wr, num_sge),
};

static const struct ibgda_oracle_field dv_context_attr_fields[] = {
	FIELD(struct mlx5dv_context_attr, flags),
	FIELD(struct mlx5dv_context_attr, comp_mask),
};

static const struct ibgda_oracle_field dv_obj_fields[] = {
	FIELD(struct mlx5dv_obj, qp),
	FIELD(struct mlx5dv_obj, cq),
	FIELD(struct mlx5dv_obj, srq),
	FIELD(struct mlx5dv_obj, rwq),
	FIELD(struct mlx5dv_obj, dm),
	FIELD(struct mlx5dv_obj, ah),
	FIELD(struct mlx5dv_obj, pd),
	FIELD(struct mlx5dv_obj, devx),
};

static const struct ibgda_oracle_field dv_pd_fields[] = {
	FIELD(struct mlx5dv_pd, pdn),
	FIELD(struct mlx5dv_pd, comp_mask),
};

static const struct ibgda_oracle_field dv_ah_fields[] = {
	FIELD(struct mlx5dv_ah, av),
	FIELD(struct mlx5dv_ah, comp_mask),
};

static const struct ibgda_oracle_field dv_context_fields[] = {
	FIELD(struct mlx5dv_context, version),
	FIELD(struct mlx5dv_context, flags),
	FIELD(struct mlx5dv_context, comp_mask),
};

static const struct ibgda_oracle_field dv_umem_fields[] = {
	FIELD(struct mlx5dv_devx_umem, umem_id),
};

static const struct ibgda_oracle_field dv_umem_in_fields[] = {
	FIELD(struct mlx5dv_devx_umem_in, addr),
	FIELD(struct mlx5dv_devx_umem_in, size),
	FIELD(struct mlx5dv_devx_umem_in, access),
	FIELD(struct mlx5dv_devx_umem_in, pgsz_bitmap),
	FIELD(struct mlx5dv_devx_umem_in, comp_mask),
	FIELD(struct mlx5dv_devx_umem_in, dmabuf_fd),
};

static const struct ibgda_oracle_field dv_uar_fields[] = {
	FIELD(struct mlx5dv_devx_uar, reg_addr),
	FIELD(struct mlx5dv_devx_uar, base_addr),
	FIELD(struct mlx5dv_devx_uar, page_id),
	FIELD(struct mlx5dv_devx_uar, mmap_off),
	FIELD(struct mlx5dv_devx_uar, comp_mask),
};

static const struct ibgda_oracle_field parent_domain_fields[] = {
	FIELD(struct ibv_parent_domain_init_attr, pd),
	FIELD(struct ibv_parent_domain_init_attr, td),
	FIELD(struct ibv_parent_domain_init_attr, comp_mask),
	FIELD(struct ibv_parent_domain_init_attr, alloc),
	FIELD(struct ibv_parent_domain_init_attr, free),
	FIELD(struct ibv_parent_domain_init_attr, pd_context),
};

static const struct ibgda_oracle_field qp_cap_fields[] = {
	FIELD(struct ibv_qp_cap, max_send_wr),
	FIELD(struct ibv_qp_cap, max_recv_wr),
	FIELD(struct ibv_qp_cap, max_send_sge),
	FIELD(struct ibv_qp_cap, max_recv_sge),
	FIELD(struct ibv_qp_cap, max_inline_data),
};

static const struct ibgda_oracle_field srq_init_attr_fields[] = {
	FIELD(struct ibv_srq_init_attr, srq_context),
	FIELD(struct ibv_srq_init_attr, attr),
	FIELD(struct ibv_srq_init_attr, attr.max_wr),
	FIELD(struct ibv_srq_init_attr, attr.max_sge),
	FIELD(struct ibv_srq_init_attr, attr.srq_limit),
};

static const struct ibgda_oracle_field qp_init_attr_ex_fields[] = {
	FIELD(struct ibv_qp_init_attr_ex, qp_context),
	FIELD(struct ibv_qp_init_attr_ex, send_cq),
	FIELD(struct ibv_qp_init_attr_ex, recv_cq),
	FIELD(struct ibv_qp_init_attr_ex, srq),
	FIELD(struct ibv_qp_init_attr_ex, cap),
	FIELD(struct ibv_qp_init_attr_ex, qp_type),
	FIELD(struct ibv_qp_init_attr_ex, sq_sig_all),
	FIELD(struct ibv_qp_init_attr_ex, comp_mask),
	FIELD(struct ibv_qp_init_attr_ex, pd),
	FIELD(struct ibv_qp_init_attr_ex, xrcd),
	FIELD(struct ibv_qp_init_attr_ex, create_flags),
	FIELD(struct ibv_qp_init_attr_ex, max_tso_header),
	FIELD(struct ibv_qp_init_attr_ex, rwq_ind_tbl),
	FIELD(struct ibv_qp_init_attr_ex, rx_hash_conf),
	FIELD(struct ibv_qp_init_attr_ex, source_qpn),
	FIELD(struct ibv_qp_init_attr_ex, send_ops_flags),
};

static const struct ibgda_oracle_field qp_attr_fields[] = {
	FIELD(struct ibv_qp_attr, qp_state),
	FIELD(struct ibv_qp_attr, cur_qp_state),
	FIELD(struct ibv_qp_attr, path_mtu),
	FIELD(struct ibv_qp_attr, path_mig_state),
	FIELD(struct ibv_qp_attr, qkey),
	FIELD(struct ibv_qp_attr, rq_psn),
	FIELD(struct ibv_qp_attr, sq_psn),
	FIELD(struct ibv_qp_attr, dest_qp_num),
	FIELD(struct ibv_qp_attr, qp_access_flags),
	FIELD(struct ibv_qp_attr, cap),
	FIELD(struct ibv_qp_attr, ah_attr),
	FIELD(struct ibv_qp_attr, alt_ah_attr),
	FIELD(struct ibv_qp_attr, pkey_index),
	FIELD(struct ibv_qp_attr, alt_pkey_index),
	FIELD(struct ibv_qp_attr, en_sqd_async_notify),
	FIELD(struct ibv_qp_attr, sq_draining),
	FIELD(struct ibv_qp_attr, max_rd_atomic),
	FIELD(struct ibv_qp_attr, max_dest_rd_atomic),
	FIELD(struct ibv_qp_attr, min_rnr_timer),
	FIELD(struct ibv_qp_attr, port_num),
	FIELD(struct ibv_qp_attr, timeout),
	FIELD(struct ibv_qp_attr, retry_cnt),
	FIELD(struct ibv_qp_attr, rnr_retry),
	FIELD(struct ibv_qp_attr, alt_port_num),
	FIELD(struct ibv_qp_attr, alt_timeout),
	FIELD(struct ibv_qp_attr, rate_limit),
};

static const struct ibgda_oracle_field dv_qp_init_attr_fields[] = {
	FIELD(struct mlx5dv_qp_init_attr, comp_mask),
	FIELD(struct mlx5dv_qp_init_attr, create_flags),
	FIELD(struct mlx5dv_qp_init_attr, dc_init_attr),
	FIELD(struct mlx5dv_qp_init_attr, dc_init_attr.dc_type),
	FIELD(struct mlx5dv_qp_init_attr, dc_init_attr.dct_access_key),
	FIELD(struct mlx5dv_qp_init_attr, send_ops_flags),
};

static const struct ibgda_oracle_field dv_cq_fields[] = {
	FIELD(struct mlx5dv_cq, buf),
	FIELD(struct mlx5dv_cq, dbrec),
	FIELD(struct mlx5dv_cq, cqe_cnt),
	FIELD(struct mlx5dv_cq, cqe_size),
	FIELD(struct mlx5dv_cq, cq_uar),
	FIELD(struct mlx5dv_cq, cqn),
	FIELD(struct mlx5dv_cq, comp_mask),
};

static const struct ibgda_oracle_field dv_srq_fields[] = {
	FIELD(struct mlx5dv_srq, buf),
	FIELD(struct mlx5dv_srq, dbrec),
	FIELD(struct mlx5dv_srq, stride),
	FIELD(struct mlx5dv_srq, head),
	FIELD(struct mlx5dv_srq, tail),
	FIELD(struct mlx5dv_srq, comp_mask),
	FIELD(struct mlx5dv_srq, srqn),
};

static const struct ibgda_oracle_layout verbs_layouts[] = {
	LAYOUT(struct ibv_device, device_fields),
	LAYOUT(struct ibv_context_ops, context_ops_fields),
	LAYOUT(struct ibv_context, context_fields),
	LAYOUT(struct verbs_context, verbs_context_fields),
	LAYOUT(struct ibv_device_attr, device_attr_fields),
	LAYOUT(struct ibv_device_attr_ex, device_attr_ex_fields),
	LAYOUT(struct ibv_port_attr, port_attr_fields),
	LAYOUT(struct ibv_gid_entry, gid_entry_fields),
	LAYOUT(struct ibv_pd, pd_fields),
	LAYOUT(struct ibv_mr, mr_fields),
	LAYOUT(struct ibv_global_route, global_route_fields),
	LAYOUT(struct ibv_ah_attr, ah_attr_fields),
	LAYOUT(struct ibv_ah, ah_fields),
	LAYOUT(struct ibv_cq, cq_fields),
	LAYOUT(struct ibv_srq, srq_fields),
	LAYOUT(struct ibv_qp, qp_fields),
	LAYOUT(struct ibv_sge, sge_fields),
	LAYOUT(struct ibv_recv_wr, recv_wr_fields),
	LAYOUT(struct mlx5dv_context_attr, dv_context_attr_fields),
	LAYOUT(struct mlx5dv_obj, dv_obj_fields),
	LAYOUT(struct mlx5dv_pd, dv_pd_fields),
	LAYOUT(struct mlx5dv_ah, dv_ah_fields),
	LAYOUT(struct mlx5dv_context, dv_context_fields),
	LAYOUT(struct mlx5dv_devx_umem, dv_umem_fields),
	LAYOUT(struct mlx5dv_devx_umem_in, dv_umem_in_fields),
	LAYOUT(struct mlx5dv_devx_uar, dv_uar_fields),
	LAYOUT(struct ibv_parent_domain_init_attr, parent_domain_fields),
	LAYOUT(struct ibv_qp_cap, qp_cap_fields),
	LAYOUT(struct ibv_srq_init_attr, srq_init_attr_fields),
	LAYOUT(struct ibv_qp_init_attr_ex, qp_init_attr_ex_fields),
	LAYOUT(struct ibv_qp_attr, qp_attr_fields),
	LAYOUT(struct mlx5dv_qp_init_attr, dv_qp_init_attr_fields),
	LAYOUT(struct mlx5dv_cq, dv_cq_fields),
	LAYOUT(struct mlx5dv_srq, dv_srq_fields),
};

size_t ibgda_oracle_verbs_layouts(const struct ibgda_oracle_layout **out)
{
	*out = verbs_layouts;
	return sizeof(verbs_layouts) / sizeof(verbs_layouts[0]);
}
