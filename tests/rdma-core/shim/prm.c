/*
 * PRM command oracle: rdma-core 56.1's own mlx5_ifc.h layouts and DEVX_SET/DEVX_GET
 * macros (level 1), and rdma-core's dr_devx_create_qp / dr_devx_modify_qp_* run with the
 * DEVX object entry points intercepted (level 2), so the command bytes they would send
 * can be compared with ibgda's encoders.
 *
 * Fields are named as "<structure>" + "<member path>" exactly as in mlx5_ifc.h; the
 * X-macro tables below are the only place the names appear, and each entry expands to
 * rdma-core's own __devx_bit_off/__devx_bit_sz and DEVX_SET/DEVX_SET64.
 */
#include <config.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "mlx5.h"
#include "mlx5dv.h"
#include "mlx5_ifc.h"
#include "mlx5dv_dr.h"

#include "prm.h"

/* Integer fields up to 32 bits: DEVX_SET. */
#define PRM_FIELDS32(X)                                                        \
	X(mbox_in, opcode) X(mbox_in, uid) X(mbox_in, op_mod)                  \
	X(mbox_out, status) X(mbox_out, syndrome)                              \
	X(query_hca_cap_in, opcode) X(query_hca_cap_in, op_mod)                \
	X(query_hca_cap_in, other_function) X(query_hca_cap_in, function_id)   \
	X(query_hca_cap_out, status) X(query_hca_cap_out, syndrome)            \
	X(query_hca_cap_out, capability.cmd_hca_cap.qp_data_in_order)          \
	X(query_hca_cap_out, capability.cmd_hca_cap.log_max_srq_sz)            \
	X(query_hca_cap_out, capability.cmd_hca_cap.log_max_qp_sz)             \
	X(query_hca_cap_out, capability.cmd_hca_cap.log_max_qp)                \
	X(query_hca_cap_out, capability.cmd_hca_cap.log_max_cq_sz)             \
	X(query_hca_cap_out, capability.cmd_hca_cap.log_max_cq)                \
	X(query_hca_cap_out, capability.cmd_hca_cap.log_max_ra_req_dc)         \
	X(query_hca_cap_out, capability.cmd_hca_cap.log_max_ra_res_dc)         \
	X(query_hca_cap_out, capability.cmd_hca_cap.log_max_ra_req_qp)         \
	X(query_hca_cap_out, capability.cmd_hca_cap.log_max_ra_res_qp)         \
	X(query_hca_cap_out, capability.cmd_hca_cap.end_pad)                   \
	X(query_hca_cap_out, capability.cmd_hca_cap.port_type)                 \
	X(query_hca_cap_out, capability.cmd_hca_cap.num_ports)                 \
	X(query_hca_cap_out, capability.cmd_hca_cap.log_max_msg)               \
	X(query_hca_cap_out, capability.cmd_hca_cap.cqe_version)               \
	X(query_hca_cap_out, capability.cmd_hca_cap.compact_address_vector)    \
	X(query_hca_cap_out, capability.cmd_hca_cap.dct)                       \
	X(query_hca_cap_out, capability.cmd_hca_cap.atomic)                    \
	X(query_hca_cap_out, capability.cmd_hca_cap.rc)                        \
	X(query_hca_cap_out, capability.cmd_hca_cap.uar_4k)                    \
	X(query_hca_cap_out, capability.cmd_hca_cap.umem_uid_0)                \
	X(query_hca_cap_out, capability.cmd_hca_cap.log_bf_reg_size)           \
	X(query_hca_cap_out, capability.cmd_hca_cap.max_wqe_sz_sq)             \
	X(query_hca_cap_out, capability.cmd_hca_cap.max_wqe_sz_sq_dc)          \
	X(query_hca_cap_out, capability.cmd_hca_cap.log_max_pd)                \
	X(query_hca_cap_out, capability.atomic_caps.atomic_req_8B_endianness_mode) \
	X(query_hca_cap_out, capability.atomic_caps.supported_atomic_req_8B_endianness_mode_1) \
	X(query_hca_cap_out, capability.atomic_caps.atomic_operations)         \
	X(query_hca_cap_out, capability.atomic_caps.atomic_size_qp)            \
	X(query_hca_cap_out, capability.atomic_caps.atomic_size_dc)            \
	X(alloc_uar_in, opcode) X(alloc_uar_in, op_mod)                        \
	X(alloc_uar_out, status) X(alloc_uar_out, syndrome) X(alloc_uar_out, uar) \
	X(dealloc_uar_in, opcode) X(dealloc_uar_in, op_mod) X(dealloc_uar_in, uar) \
	X(dealloc_uar_out, status) X(dealloc_uar_out, syndrome)                \
	X(destroy_cq_in, opcode) X(destroy_cq_in, uid) X(destroy_cq_in, cqn)   \
	X(destroy_qp_in, opcode) X(destroy_qp_in, uid) X(destroy_qp_in, qpn)   \
	X(destroy_dct_in, opcode) X(destroy_dct_in, uid) X(destroy_dct_in, dctn) \
	X(create_qp_out, status) X(create_qp_out, syndrome) X(create_qp_out, qpn) \
	X(create_dct_out, dctn)                                                \
	X(create_cq_out, cqn)                                                  \
	X(create_qp_in, opcode) X(create_qp_in, uid) X(create_qp_in, op_mod)   \
	X(create_qp_in, opt_param_mask)                                        \
	X(create_qp_in, wq_umem_id) X(create_qp_in, wq_umem_valid)             \
	PRM_QPC_CREATE(X, create_qp_in)                                        \
	PRM_MODIFY(X, rst2init_qp_in)                                          \
	PRM_MODIFY(X, init2rtr_qp_in)                                          \
	PRM_MODIFY(X, rtr2rts_qp_in)                                           \
	PRM_QPC_RST2INIT(X, rst2init_qp_in)                                    \
	PRM_QPC_INIT2RTR(X, init2rtr_qp_in)                                    \
	PRM_QPC_RTR2RTS(X, rtr2rts_qp_in)

#define PRM_MODIFY(X, cmd)                                                     \
	X(cmd, opcode) X(cmd, uid) X(cmd, op_mod) X(cmd, qpn)                  \
	X(cmd, opt_param_mask)

#define PRM_QPC_CREATE(X, cmd)                                                 \
	X(cmd, qpc.st) X(cmd, qpc.isolate_vl_tc) X(cmd, qpc.pm_state)          \
	X(cmd, qpc.pd) X(cmd, qpc.log_rq_size) X(cmd, qpc.log_rq_stride)       \
	X(cmd, qpc.log_sq_size) X(cmd, qpc.ts_format) X(cmd, qpc.uar_page)     \
	X(cmd, qpc.user_index) X(cmd, qpc.log_page_size) X(cmd, qpc.cqn_snd)   \
	X(cmd, qpc.page_offset) X(cmd, qpc.cqn_rcv) X(cmd, qpc.rq_type)        \
	X(cmd, qpc.srqn_rmpn_xrqn) X(cmd, qpc.dbr_umem_valid)                  \
	X(cmd, qpc.dbr_umem_id)

#define PRM_QPC_RST2INIT(X, cmd)                                               \
	X(cmd, qpc.pm_state) X(cmd, qpc.primary_address_path.pkey_index)       \
	X(cmd, qpc.primary_address_path.vhca_port_num) X(cmd, qpc.atomic_mode) \
	X(cmd, qpc.rre) X(cmd, qpc.rwe) X(cmd, qpc.rae)

#define PRM_QPC_INIT2RTR(X, cmd)                                               \
	X(cmd, qpc.mtu) X(cmd, qpc.log_msg_max) X(cmd, qpc.remote_qpn)         \
	X(cmd, qpc.log_rra_max) X(cmd, qpc.min_rnr_nak) X(cmd, qpc.next_rcv_psn) \
	X(cmd, qpc.primary_address_path.fl)                                    \
	X(cmd, qpc.primary_address_path.pkey_index)                            \
	X(cmd, qpc.primary_address_path.grh)                                   \
	X(cmd, qpc.primary_address_path.rlid)                                  \
	X(cmd, qpc.primary_address_path.src_addr_index)                        \
	X(cmd, qpc.primary_address_path.stat_rate)                             \
	X(cmd, qpc.primary_address_path.hop_limit)                             \
	X(cmd, qpc.primary_address_path.tclass)                                \
	X(cmd, qpc.primary_address_path.flow_label)                            \
	X(cmd, qpc.primary_address_path.dscp)                                  \
	X(cmd, qpc.primary_address_path.udp_sport)                             \
	X(cmd, qpc.primary_address_path.eth_prio)                              \
	X(cmd, qpc.primary_address_path.sl)                                    \
	X(cmd, qpc.primary_address_path.vhca_port_num)                         \
	X(cmd, qpc.primary_address_path.rmac_47_32)                            \
	X(cmd, qpc.primary_address_path.rmac_31_0)

#define PRM_QPC_RTR2RTS(X, cmd)                                                \
	X(cmd, qpc.primary_address_path.ack_timeout)                           \
	X(cmd, qpc.log_ack_req_freq) X(cmd, qpc.log_sra_max)                   \
	X(cmd, qpc.retry_count) X(cmd, qpc.rnr_retry) X(cmd, qpc.next_send_psn)

/* 64-bit fields: DEVX_SET64. */
#define PRM_FIELDS64(X)                                                        \
	X(create_qp_in, qpc.dbr_addr) X(rst2init_qp_in, qpc.dc_access_key)

/* Byte strings: copied to DEVX_ADDR_OF as rdma-core does. */
#define PRM_FIELDS_BYTES(X)                                                    \
	X(init2rtr_qp_in, qpc.primary_address_path.rgid_rip)

/* Whole structures whose size we compare. */
#define PRM_STRUCTS(X)                                                         \
	X(mbox_in) X(mbox_out) X(query_hca_cap_in) X(query_hca_cap_out)        \
	X(cmd_hca_cap) X(atomic_caps) X(alloc_uar_in) X(alloc_uar_out)         \
	X(dealloc_uar_in) X(dealloc_uar_out) X(destroy_cq_in) X(destroy_qp_in) \
	X(destroy_dct_in) X(create_qp_in) X(create_qp_out) X(create_dct_out)   \
	X(create_cq_out)                                                       \
	X(rst2init_qp_in) X(init2rtr_qp_in) X(rtr2rts_qp_in)                   \
	X(rst2init_qp_out) X(init2rtr_qp_out) X(rtr2rts_qp_out) X(qpc) X(ads)

/* Named values of mlx5_ifc.h (and verbs.h's access flags) our constants must equal. */
#define PRM_CONSTANTS(X)                                                       \
	X(MLX5_CMD_OP_QUERY_HCA_CAP) X(MLX5_CMD_OP_CREATE_CQ)                  \
	X(MLX5_CMD_OP_DESTROY_CQ) X(MLX5_CMD_OP_CREATE_QP)                     \
	X(MLX5_CMD_OP_DESTROY_QP) X(MLX5_CMD_OP_RST2INIT_QP)                   \
	X(MLX5_CMD_OP_INIT2RTR_QP) X(MLX5_CMD_OP_RTR2RTS_QP)                   \
	X(MLX5_CMD_OP_2ERR_QP) X(MLX5_CMD_OP_2RST_QP)                          \
	X(MLX5_CMD_OP_CREATE_DCT) X(MLX5_CMD_OP_DESTROY_DCT)                   \
	X(MLX5_CMD_OP_ALLOC_UAR) X(MLX5_CMD_OP_DEALLOC_UAR)                    \
	X(HCA_CAP_OPMOD_GET_MAX) X(HCA_CAP_OPMOD_GET_CUR)                      \
	X(MLX5_CAP_GENERAL) X(MLX5_CAP_ATOMIC)                                 \
	X(MLX5_QPC_ST_RC) X(MLX5_QPC_PM_STATE_MIGRATED)                        \
	X(MLX5_CMD_STAT_OK) X(MLX5_CMD_STAT_INT_ERR) X(MLX5_CMD_STAT_BAD_OP_ERR) \
	X(MLX5_CMD_STAT_BAD_PARAM_ERR) X(MLX5_CMD_STAT_BAD_SYS_STATE_ERR)      \
	X(MLX5_CMD_STAT_BAD_RES_ERR) X(MLX5_CMD_STAT_RES_BUSY)                 \
	X(MLX5_CMD_STAT_LIM_ERR) X(MLX5_CMD_STAT_BAD_RES_STATE_ERR)            \
	X(MLX5_CMD_STAT_IX_ERR) X(MLX5_CMD_STAT_NO_RES_ERR)                    \
	X(MLX5_CMD_STAT_BAD_INP_LEN_ERR) X(MLX5_CMD_STAT_BAD_OUTP_LEN_ERR)     \
	X(MLX5_CMD_STAT_BAD_QP_STATE_ERR) X(MLX5_CMD_STAT_BAD_PKT_ERR)         \
	X(MLX5_CMD_STAT_BAD_SIZE_OUTS_CQES_ERR)                               \
	X(IBV_ACCESS_LOCAL_WRITE) X(IBV_ACCESS_REMOTE_WRITE)                  \
	X(IBV_ACCESS_REMOTE_READ) X(IBV_ACCESS_REMOTE_ATOMIC)                 \
	X(IBV_ACCESS_RELAXED_ORDERING)

#define PRM_CONSTANT_ENTRY(name) { #name, (uint64_t)(name) },

static const struct ibgda_prm_constant prm_constants[] = {
	PRM_CONSTANTS(PRM_CONSTANT_ENTRY)
};

const struct ibgda_prm_constant *ibgda_prm_constants(uint32_t *count)
{
	*count = sizeof(prm_constants) / sizeof(prm_constants[0]);
	return prm_constants;
}

#define PRM_ENTRY(typ, fld)                                                    \
	{ #typ, #fld, __devx_bit_off(typ, fld), __devx_bit_sz(typ, fld) },

static const struct ibgda_prm_field prm_fields[] = {
	PRM_FIELDS32(PRM_ENTRY) PRM_FIELDS64(PRM_ENTRY) PRM_FIELDS_BYTES(PRM_ENTRY)
};

#define PRM_STRUCT_ENTRY(typ) { #typ, "", 0, __devx_st_sz_bits(typ) },

static const struct ibgda_prm_field prm_structs[] = {
	PRM_STRUCTS(PRM_STRUCT_ENTRY)
};

const struct ibgda_prm_field *ibgda_prm_fields(uint32_t *count)
{
	*count = sizeof(prm_fields) / sizeof(prm_fields[0]);
	return prm_fields;
}

const struct ibgda_prm_field *ibgda_prm_structs(uint32_t *count)
{
	*count = sizeof(prm_structs) / sizeof(prm_structs[0]);
	return prm_structs;
}

#define PRM_SET32(typ, fld)                                                    \
	if (!strcmp(structure, #typ) && !strcmp(field, #fld)) {                \
		if (len < DEVX_ST_SZ_BYTES(typ))                               \
			return -EINVAL;                                        \
		DEVX_SET(typ, buf, fld, (uint32_t)value);                      \
		return 0;                                                      \
	}

#define PRM_SET64(typ, fld)                                                    \
	if (!strcmp(structure, #typ) && !strcmp(field, #fld)) {                \
		if (len < DEVX_ST_SZ_BYTES(typ))                               \
			return -EINVAL;                                        \
		DEVX_SET64(typ, buf, fld, value);                              \
		return 0;                                                      \
	}

int ibgda_prm_set(const char *structure, const char *field, void *buf,
		  size_t len, uint64_t value)
{
	PRM_FIELDS32(PRM_SET32)
	PRM_FIELDS64(PRM_SET64)
	return -ENOENT;
}

#define PRM_SET_BYTES(typ, fld)                                                \
	if (!strcmp(structure, #typ) && !strcmp(field, #fld)) {                \
		if (len < DEVX_ST_SZ_BYTES(typ) ||                             \
		    value_len != __devx_bit_sz(typ, fld) / 8)                  \
			return -EINVAL;                                        \
		memcpy(DEVX_ADDR_OF(typ, buf, fld), value, value_len);         \
		return 0;                                                      \
	}

int ibgda_prm_set_bytes(const char *structure, const char *field, void *buf,
			size_t len, const uint8_t *value, size_t value_len)
{
	PRM_FIELDS_BYTES(PRM_SET_BYTES)
	return -ENOENT;
}

#define PRM_GET(typ, fld)                                                      \
	if (!strcmp(structure, #typ) && !strcmp(field, #fld)) {                \
		if (len < DEVX_ST_SZ_BYTES(typ))                               \
			return -EINVAL;                                        \
		*value = DEVX_GET(typ, buf, fld);                              \
		return 0;                                                      \
	}

#define PRM_GET64(typ, fld)                                                    \
	if (!strcmp(structure, #typ) && !strcmp(field, #fld)) {                \
		if (len < DEVX_ST_SZ_BYTES(typ))                               \
			return -EINVAL;                                        \
		*value = DEVX_GET64(typ, buf, fld);                            \
		return 0;                                                      \
	}

int ibgda_prm_get(const char *structure, const char *field, const void *buf,
		  size_t len, uint64_t *value)
{
	PRM_FIELDS32(PRM_GET)
	PRM_FIELDS64(PRM_GET64)
	return -ENOENT;
}

/* ---- Level 2: dr_devx_* with the DEVX object calls captured ------------------------ */

/* Per thread: oracle tests run on several threads at once. */
static __thread uint8_t captured[4096];
static __thread size_t captured_len;
static struct mlx5dv_devx_obj fake_obj;

/* Linked with -Wl,--wrap=mlx5dv_devx_obj_create: every call from the provider lands here. */
struct mlx5dv_devx_obj *__wrap_mlx5dv_devx_obj_create(struct ibv_context *context,
						      const void *in, size_t inlen,
						      void *out, size_t outlen);
struct mlx5dv_devx_obj *__wrap_mlx5dv_devx_obj_create(struct ibv_context *context,
						      const void *in, size_t inlen,
						      void *out, size_t outlen)
{
	(void)context;
	if (inlen > sizeof(captured)) {
		errno = EINVAL;
		return NULL;
	}
	memcpy(captured, in, inlen);
	captured_len = inlen;
	memset(out, 0, outlen);
	return &fake_obj;
}

int __wrap_mlx5dv_devx_obj_modify(struct mlx5dv_devx_obj *obj, const void *in,
				  size_t inlen, void *out, size_t outlen);
int __wrap_mlx5dv_devx_obj_modify(struct mlx5dv_devx_obj *obj, const void *in,
				  size_t inlen, void *out, size_t outlen)
{
	(void)obj;
	if (inlen > sizeof(captured))
		return EINVAL;
	memcpy(captured, in, inlen);
	captured_len = inlen;
	memset(out, 0, outlen);
	return 0;
}

static int take(uint8_t *out, size_t out_len, size_t *written)
{
	if (captured_len > out_len)
		return -ENOSPC;
	memcpy(out, captured, captured_len);
	*written = captured_len;
	captured_len = 0;
	return 0;
}

int ibgda_prm_dr_create_qp(const struct ibgda_prm_dr_create_qp *args,
			   uint8_t *out, size_t out_len, size_t *written)
{
	struct dr_devx_qp_create_attr attr = {
		.page_id = args->page_id,
		.pdn = args->pdn,
		.cqn = args->cqn,
		.pm_state = args->pm_state,
		.service_type = args->service_type,
		.buff_umem_id = args->buff_umem_id,
		.db_umem_id = args->db_umem_id,
		.sq_wqe_cnt = args->sq_wqe_cnt,
		.rq_wqe_cnt = args->rq_wqe_cnt,
		.rq_wqe_shift = args->rq_wqe_shift,
		.isolate_vl_tc = args->isolate_vl_tc != 0,
		.qp_ts_format = args->qp_ts_format,
	};
	captured_len = 0;
	if (!dr_devx_create_qp(NULL, &attr))
		return -errno;
	return take(out, out_len, written);
}

int ibgda_prm_dr_rst2init(uint32_t qpn, uint16_t port, uint8_t *out,
			  size_t out_len, size_t *written)
{
	int ret;

	fake_obj.object_id = qpn;
	captured_len = 0;
	ret = dr_devx_modify_qp_rst2init(NULL, &fake_obj, port);
	if (ret)
		return -ret;
	return take(out, out_len, written);
}

int ibgda_prm_dr_init2rtr(uint32_t qpn, const struct ibgda_prm_dr_rtr *args,
			  uint8_t *out, size_t out_len, size_t *written)
{
	struct dr_devx_qp_rtr_attr attr = {};
	int ret;

	memcpy(attr.dgid_attr.gid.raw, args->gid, sizeof(args->gid));
	attr.dgid_attr.roce_ver = args->roce_v2 ? MLX5_ROCE_VERSION_2 : MLX5_ROCE_VERSION_1;
	memcpy(attr.dgid_attr.mac, args->mac, sizeof(args->mac));
	attr.mtu = (enum ibv_mtu)args->mtu;
	attr.qp_num = args->qp_num;
	attr.port_num = args->port_num;
	attr.min_rnr_timer = args->min_rnr_timer;
	attr.sgid_index = args->sgid_index;
	attr.fl = args->fl != 0;

	fake_obj.object_id = qpn;
	captured_len = 0;
	ret = dr_devx_modify_qp_init2rtr(NULL, &fake_obj, &attr);
	if (ret)
		return -ret;
	return take(out, out_len, written);
}

int ibgda_prm_dr_rtr2rts(uint32_t qpn, uint8_t timeout, uint8_t retry_cnt,
			 uint8_t rnr_retry, uint8_t *out, size_t out_len,
			 size_t *written)
{
	struct dr_devx_qp_rts_attr attr = {
		.timeout = timeout,
		.retry_cnt = retry_cnt,
		.rnr_retry = rnr_retry,
	};
	int ret;

	fake_obj.object_id = qpn;
	captured_len = 0;
	ret = dr_devx_modify_qp_rtr2rts(NULL, &fake_obj, &attr);
	if (ret)
		return -ret;
	return take(out, out_len, written);
}

uint32_t ibgda_prm_dr_chunk_size_max(void)
{
	return DR_CHUNK_SIZE_MAX;
}
