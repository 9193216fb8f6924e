/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * ibgda rdma-core oracle shim.
 *
 * This file is ibgda's own code. It is compiled against the *private* headers
 * of rdma-core's mlx5 provider (mlx5.h, wqe.h) so it can build the provider's
 * objects in plain memory: a context, a PD, a CQ and one QP (RC or DCI) whose
 * send ring, doorbell record and BlueFlame register are ordinary buffers. It
 * then calls the provider's real data-path functions on them
 * (mlx5_post_send, the ibv_wr_* builders installed by mlx5_qp_fill_wr_pfns,
 * mlx5_create_ah, mlx5_poll_cq) and copies out what they wrote.
 *
 * No device, no kernel and no sysfs are touched: every path used here was
 * checked to stay in user memory for an InfiniBand port whose link layer is
 * cached in the context.
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "mlx5.h"
#include "mlx5dv.h"
#include "wqe.h"

#include "oracle.h"

/* ---- Level 1: layouts ------------------------------------------------------ */

static const struct ibgda_oracle_field ctrl_fields[] = {
	FIELD(struct mlx5_wqe_ctrl_seg, opmod_idx_opcode),
	FIELD(struct mlx5_wqe_ctrl_seg, qpn_ds),
	FIELD(struct mlx5_wqe_ctrl_seg, signature),
	FIELD(struct mlx5_wqe_ctrl_seg, dci_stream_channel_id),
	FIELD(struct mlx5_wqe_ctrl_seg, fm_ce_se),
	FIELD(struct mlx5_wqe_ctrl_seg, imm),
};

static const struct ibgda_oracle_field raddr_fields[] = {
	FIELD(struct mlx5_wqe_raddr_seg, raddr),
	FIELD(struct mlx5_wqe_raddr_seg, rkey),
	FIELD(struct mlx5_wqe_raddr_seg, reserved),
};

static const struct ibgda_oracle_field data_fields[] = {
	FIELD(struct mlx5_wqe_data_seg, byte_count),
	FIELD(struct mlx5_wqe_data_seg, lkey),
	FIELD(struct mlx5_wqe_data_seg, addr),
};

static const struct ibgda_oracle_field inl_data_fields[] = {
	FIELD(struct mlx5_wqe_inl_data_seg, byte_count),
};

static const struct ibgda_oracle_field inline_seg_fields[] = {
	FIELD(struct mlx5_wqe_inline_seg, byte_count),
};

static const struct ibgda_oracle_field atomic_fields[] = {
	FIELD(struct mlx5_wqe_atomic_seg, swap_add),
	FIELD(struct mlx5_wqe_atomic_seg, compare),
};

static const struct ibgda_oracle_field masked_atomic_fields[] = {
	FIELD(struct mlx5_wqe_masked_atomic_seg, swap_add),
	FIELD(struct mlx5_wqe_masked_atomic_seg, compare),
	FIELD(struct mlx5_wqe_masked_atomic_seg, swap_add_mask),
	FIELD(struct mlx5_wqe_masked_atomic_seg, compare_mask),
};

static const struct ibgda_oracle_field av_fields[] = {
	FIELD(struct mlx5_wqe_av, key.qkey.qkey),
	FIELD(struct mlx5_wqe_av, key.qkey.reserved),
	FIELD(struct mlx5_wqe_av, key.dc_key),
	FIELD(struct mlx5_wqe_av, dqp_dct),
	FIELD(struct mlx5_wqe_av, stat_rate_sl),
	FIELD(struct mlx5_wqe_av, fl_mlid),
	FIELD(struct mlx5_wqe_av, rlid),
	FIELD(struct mlx5_wqe_av, reserved0),
	FIELD(struct mlx5_wqe_av, rmac),
	FIELD(struct mlx5_wqe_av, tclass),
	FIELD(struct mlx5_wqe_av, hop_limit),
	FIELD(struct mlx5_wqe_av, grh_gid_fl),
	FIELD(struct mlx5_wqe_av, rgid),
};

static const struct ibgda_oracle_field datagram_fields[] = {
	FIELD(struct mlx5_wqe_datagram_seg, av),
};

static const struct ibgda_oracle_field cqe64_fields[] = {
	FIELD(struct mlx5_cqe64, rsvd0),
	FIELD(struct mlx5_cqe64, wqe_id),
	FIELD(struct mlx5_cqe64, rsvd4),
	FIELD(struct mlx5_cqe64, ml_path),
	FIELD(struct mlx5_cqe64, rsvd20),
	FIELD(struct mlx5_cqe64, slid),
	FIELD(struct mlx5_cqe64, flags_rqpn),
	FIELD(struct mlx5_cqe64, hds_ip_ext),
	FIELD(struct mlx5_cqe64, l4_hdr_type_etc),
	FIELD(struct mlx5_cqe64, vlan_info),
	FIELD(struct mlx5_cqe64, tm_cqe),
	FIELD(struct mlx5_cqe64, tmh),
	FIELD(struct mlx5_cqe64, srqn_uidx),
	FIELD(struct mlx5_cqe64, imm_inval_pkey),
	FIELD(struct mlx5_cqe64, app),
	FIELD(struct mlx5_cqe64, app_op),
	FIELD(struct mlx5_cqe64, app_info),
	FIELD(struct mlx5_cqe64, byte_cnt),
	FIELD(struct mlx5_cqe64, timestamp),
	FIELD(struct mlx5_cqe64, sop_drop_qpn),
	FIELD(struct mlx5_cqe64, wqe_counter),
	FIELD(struct mlx5_cqe64, signature),
	FIELD(struct mlx5_cqe64, op_own),
};

static const struct ibgda_oracle_field err_cqe_fields[] = {
	FIELD(struct mlx5_err_cqe, rsvd0),
	FIELD(struct mlx5_err_cqe, srqn),
	FIELD(struct mlx5_err_cqe, rsvd1),
	FIELD(struct mlx5_err_cqe, vendor_err_synd),
	FIELD(struct mlx5_err_cqe, syndrome),
	FIELD(struct mlx5_err_cqe, s_wqe_opcode_qpn),
	FIELD(struct mlx5_err_cqe, wqe_counter),
	FIELD(struct mlx5_err_cqe, signature),
	FIELD(struct mlx5_err_cqe, op_own),
};

static const struct ibgda_oracle_layout layouts[] = {
	LAYOUT(struct mlx5_wqe_ctrl_seg, ctrl_fields),
	LAYOUT(struct mlx5_wqe_raddr_seg, raddr_fields),
	LAYOUT(struct mlx5_wqe_data_seg, data_fields),
	LAYOUT(struct mlx5_wqe_inl_data_seg, inl_data_fields),
	LAYOUT(struct mlx5_wqe_inline_seg, inline_seg_fields),
	LAYOUT(struct mlx5_wqe_atomic_seg, atomic_fields),
	LAYOUT(struct mlx5_wqe_masked_atomic_seg, masked_atomic_fields),
	LAYOUT(struct mlx5_wqe_av, av_fields),
	LAYOUT(struct mlx5_wqe_datagram_seg, datagram_fields),
	LAYOUT(struct mlx5_cqe64, cqe64_fields),
	LAYOUT(struct mlx5_err_cqe, err_cqe_fields),
};

size_t ibgda_oracle_layouts(const struct ibgda_oracle_layout **out)
{
	*out = layouts;
	return sizeof(layouts) / sizeof(layouts[0]);
}

/* ---- Level 1: constants ---------------------------------------------------- */

#define K(name) { #name, (uint64_t)(name) }

static const struct ibgda_oracle_constant constants[] = {
	/* send WQE opcodes (mlx5dv.h) */
	K(MLX5_OPCODE_NOP),
	K(MLX5_OPCODE_SEND_INVAL),
	K(MLX5_OPCODE_RDMA_WRITE),
	K(MLX5_OPCODE_RDMA_WRITE_IMM),
	K(MLX5_OPCODE_SEND),
	K(MLX5_OPCODE_SEND_IMM),
	K(MLX5_OPCODE_TSO),
	K(MLX5_OPCODE_RDMA_READ),
	K(MLX5_OPCODE_ATOMIC_CS),
	K(MLX5_OPCODE_ATOMIC_FA),
	K(MLX5_OPCODE_ATOMIC_MASKED_CS),
	K(MLX5_OPCODE_ATOMIC_MASKED_FA),
	K(MLX5_OPCODE_FMR),
	K(MLX5_OPCODE_LOCAL_INVAL),
	K(MLX5_OPCODE_CONFIG_CMD),
	K(MLX5_OPCODE_SET_PSV),
	K(MLX5_OPCODE_UMR),
	K(MLX5_OPCODE_TAG_MATCHING),
	K(MLX5_OPCODE_FLOW_TBL_ACCESS),
	K(MLX5_OPCODE_MMO),
	/* control segment fm_ce_se bits */
	K(MLX5_WQE_CTRL_CQ_UPDATE),
	K(MLX5_WQE_CTRL_SOLICITED),
	K(MLX5_WQE_CTRL_FENCE),
	K(MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE),
	/* segments */
	K(MLX5_INLINE_SEG),
	K(MLX5_EXTENDED_UD_AV),
	K(MLX5_INVALID_LKEY),
	K(MLX5_SEND_WQE_BB),
	K(MLX5_SEND_WQE_SHIFT),
	K(MLX5_ETH_WQE_L3_CSUM),
	K(MLX5_ETH_WQE_L4_CSUM),
	/* doorbells (mlx5dv.h, mlx5.h) */
	K(MLX5_RCV_DBR),
	K(MLX5_SND_DBR),
	K(MLX5_CQ_SET_CI),
	K(MLX5_CQ_ARM_DB),
	K(MLX5_CQ_DOORBELL),
	K(MLX5_CQ_DB_REQ_NOT_SOL),
	K(MLX5_CQ_DB_REQ_NOT),
	K(MLX5_BF_OFFSET),
	K(MLX5_ADAPTER_PAGE_SIZE),
	/* CQE */
	K(MLX5_CQE_OWNER_MASK),
	K(MLX5_CQE_REQ),
	K(MLX5_CQE_RESP_WR_IMM),
	K(MLX5_CQE_RESP_SEND),
	K(MLX5_CQE_RESP_SEND_IMM),
	K(MLX5_CQE_RESP_SEND_INV),
	K(MLX5_CQE_RESIZE_CQ),
	K(MLX5_CQE_NO_PACKET),
	K(MLX5_CQE_SIG_ERR),
	K(MLX5_CQE_REQ_ERR),
	K(MLX5_CQE_RESP_ERR),
	K(MLX5_CQE_INVALID),
	K(MLX5_INLINE_SCATTER_32),
	K(MLX5_INLINE_SCATTER_64),
	K(MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR),
	K(MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR),
	K(MLX5_CQE_SYNDROME_LOCAL_PROT_ERR),
	K(MLX5_CQE_SYNDROME_WR_FLUSH_ERR),
	K(MLX5_CQE_SYNDROME_MW_BIND_ERR),
	K(MLX5_CQE_SYNDROME_BAD_RESP_ERR),
	K(MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR),
	K(MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR),
	K(MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR),
	K(MLX5_CQE_SYNDROME_REMOTE_OP_ERR),
	K(MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR),
	K(MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR),
	K(MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR),
	K(MLX5_CQE_VENDOR_SYNDROME_ODP_PFAULT),
	K(MLX5_CQE_VERSION_V0),
	K(MLX5_CQE_VERSION_V1),
	/* DC */
	K(MLX5DV_DCTYPE_DCT),
	K(MLX5DV_DCTYPE_DCI),
	/* verbs: send flags */
	K(IBV_SEND_FENCE),
	K(IBV_SEND_SIGNALED),
	K(IBV_SEND_SOLICITED),
	K(IBV_SEND_INLINE),
	/* verbs: work-completion status */
	K(IBV_WC_SUCCESS),
	K(IBV_WC_LOC_LEN_ERR),
	K(IBV_WC_LOC_QP_OP_ERR),
	K(IBV_WC_LOC_EEC_OP_ERR),
	K(IBV_WC_LOC_PROT_ERR),
	K(IBV_WC_WR_FLUSH_ERR),
	K(IBV_WC_MW_BIND_ERR),
	K(IBV_WC_BAD_RESP_ERR),
	K(IBV_WC_LOC_ACCESS_ERR),
	K(IBV_WC_REM_INV_REQ_ERR),
	K(IBV_WC_REM_ACCESS_ERR),
	K(IBV_WC_REM_OP_ERR),
	K(IBV_WC_RETRY_EXC_ERR),
	K(IBV_WC_RNR_RETRY_EXC_ERR),
	K(IBV_WC_LOC_RDD_VIOL_ERR),
	K(IBV_WC_REM_INV_RD_REQ_ERR),
	K(IBV_WC_REM_ABORT_ERR),
	K(IBV_WC_INV_EECN_ERR),
	K(IBV_WC_INV_EEC_STATE_ERR),
	K(IBV_WC_FATAL_ERR),
	K(IBV_WC_RESP_TIMEOUT_ERR),
	K(IBV_WC_GENERAL_ERR),
	K(IBV_WC_TM_ERR),
	K(IBV_WC_TM_RNDV_INCOMPLETE),
	/* verbs: work-completion opcodes */
	K(IBV_WC_SEND),
	K(IBV_WC_RDMA_WRITE),
	K(IBV_WC_RDMA_READ),
	K(IBV_WC_COMP_SWAP),
	K(IBV_WC_FETCH_ADD),
	K(IBV_WC_BIND_MW),
	K(IBV_WC_LOCAL_INV),
	K(IBV_WC_TSO),
	K(IBV_WC_FLUSH),
	K(IBV_WC_ATOMIC_WRITE),
	K(IBV_WC_RECV),
	K(IBV_WC_RECV_RDMA_WITH_IMM),
	K(IBV_WC_DRIVER1),
	K(IBV_WC_DRIVER2),
	K(IBV_WC_DRIVER3),
	/* verbs: work-completion flags */
	K(IBV_WC_GRH),
	K(IBV_WC_WITH_IMM),
	K(IBV_WC_IP_CSUM_OK),
	K(IBV_WC_WITH_INV),
	K(IBV_WC_TM_SYNC_REQ),
	K(IBV_WC_TM_MATCH),
	K(IBV_WC_TM_DATA_VALID),
};

size_t ibgda_oracle_constants(const struct ibgda_oracle_constant **out)
{
	*out = constants;
	return sizeof(constants) / sizeof(constants[0]);
}

/* ---- Level 1: mlx5dv.h inline helpers ---------------------------------------- */

void ibgda_oracle_set_ctrl_seg(uint8_t seg[16], uint16_t pi, uint8_t opcode,
			       uint8_t opmod, uint32_t qp_num, uint8_t fm_ce_se,
			       uint8_t ds, uint8_t signature, uint32_t imm)
{
	struct mlx5_wqe_ctrl_seg s;

	memcpy(&s, seg, sizeof(s));
	mlx5dv_set_ctrl_seg(&s, pi, opcode, opmod, qp_num, fm_ce_se, ds,
			    signature, imm);
	memcpy(seg, &s, sizeof(s));
}

void ibgda_oracle_set_data_seg(uint8_t seg[16], uint32_t length, uint32_t lkey,
			       uint64_t address)
{
	struct mlx5_wqe_data_seg s;

	memcpy(&s, seg, sizeof(s));
	mlx5dv_set_data_seg(&s, length, lkey, (uintptr_t)address);
	memcpy(seg, &s, sizeof(s));
}

void ibgda_oracle_set_dgram_seg(uint8_t seg[48], uint64_t key, uint32_t dqp_dct,
				uint8_t ext, uint8_t stat_rate_sl,
				uint8_t fl_mlid, uint16_t rlid,
				const uint8_t rmac[6], uint8_t tclass,
				uint8_t hop_limit, uint32_t grh_gid_fl,
				const uint8_t rgid[16])
{
	struct mlx5_wqe_datagram_seg s;
	uint8_t mac[ETHERNET_LL_SIZE];
	uint8_t gid[16];

	memcpy(&s, seg, sizeof(s));
	memcpy(mac, rmac, sizeof(mac));
	memcpy(gid, rgid, sizeof(gid));
	mlx5dv_set_dgram_seg(&s, key, dqp_dct, ext, stat_rate_sl, fl_mlid, rlid,
			     mac, tclass, hop_limit, grh_gid_fl, gid);
	memcpy(seg, &s, sizeof(s));
}

static struct mlx5_cqe64 cqe_from_bytes(const uint8_t cqe[64])
{
	struct mlx5_cqe64 c;

	memcpy(&c, cqe, sizeof(c));
	return c;
}

uint8_t ibgda_oracle_cqe_owner(const uint8_t cqe[64])
{
	struct mlx5_cqe64 c = cqe_from_bytes(cqe);

	return mlx5dv_get_cqe_owner(&c);
}

uint8_t ibgda_oracle_cqe_se(const uint8_t cqe[64])
{
	struct mlx5_cqe64 c = cqe_from_bytes(cqe);

	return mlx5dv_get_cqe_se(&c);
}

uint8_t ibgda_oracle_cqe_format(const uint8_t cqe[64])
{
	struct mlx5_cqe64 c = cqe_from_bytes(cqe);

	return mlx5dv_get_cqe_format(&c);
}

uint8_t ibgda_oracle_cqe_opcode(const uint8_t cqe[64])
{
	struct mlx5_cqe64 c = cqe_from_bytes(cqe);

	return mlx5dv_get_cqe_opcode(&c);
}

size_t ibgda_oracle_abi_sizes(uint32_t *out, size_t n)
{
	const uint32_t sizes[] = {
		sizeof(struct ibgda_oracle_config),
		sizeof(struct ibgda_oracle_sge),
		sizeof(struct ibgda_oracle_buf),
		sizeof(struct ibgda_oracle_dc),
		sizeof(struct ibgda_oracle_wr),
		sizeof(struct ibgda_oracle_capture),
		sizeof(struct ibgda_oracle_post_result),
		sizeof(struct ibgda_oracle_wc),
		sizeof(struct ibgda_oracle_poll_result),
	};
	size_t i, count = sizeof(sizes) / sizeof(sizes[0]);

	if (count > n)
		count = n;
	for (i = 0; i < count; i++)
		out[i] = sizes[i];
	return count;
}

/* ---- Level 2: fake objects --------------------------------------------------- */

/* Upper bounds the shim enforces on one request (arrays are sized by them). */
enum {
	ORACLE_MAX_SGE = 64,
	ORACLE_MAX_WR = 4096,
	ORACLE_MAX_QUEUE = 1 << 16,
	ORACLE_MAX_BF_BUF = 2048,
	ORACLE_DBREC_BYTES = 64,
};

struct ibgda_oracle {
	struct ibgda_oracle_config cfg;
	struct mlx5_context *ctx;
	struct mlx5_pd *pd;
	struct mlx5_cq *cq;
	struct mlx5_qp *qp;
	struct mlx5_bf bf;
	int32_t uidx;           /* cqe_version 1 only, else -1 */
	bool qp_stored;

	uint8_t *sq;            /* sq_wqebbs * 64, page aligned */
	size_t sq_bytes;
	uint8_t *bf_reg;        /* 2 * max(bf_buf_size, 64), page aligned */
	size_t bf_bytes;
	uint8_t *qp_db;         /* ORACLE_DBREC_BYTES */
	uint64_t *sq_wrid;
	unsigned *sq_wqe_head;
	uint32_t *sq_wr_data;
	uint64_t *rq_wrid;
	unsigned *rq_wqe_head;
	uint8_t *cq_buf;        /* cqes * 64, page aligned */
	size_t cq_bytes;
	uint8_t *cq_db;         /* ORACLE_DBREC_BYTES */
	struct ibv_wc *wc_tmp;  /* scratch for ibgda_oracle_poll */
	uint32_t wc_tmp_len;
};

static bool is_pow2(uint32_t v)
{
	return v && !(v & (v - 1));
}

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static void *page_alloc(size_t bytes)
{
	void *p = NULL;

	if (bytes < 4096)
		bytes = 4096;
	if (posix_memalign(&p, 4096, bytes))
		return NULL;
	memset(p, 0, bytes);
	return p;
}

void ibgda_oracle_free(struct ibgda_oracle *o)
{
	if (!o)
		return;
	if (o->ctx && o->qp_stored)
		mlx5_clear_qp(o->ctx, o->cfg.qpn);
	if (o->ctx && o->uidx >= 0)
		mlx5_clear_uidx(o->ctx, (uint32_t)o->uidx);
	if (o->ctx) {
		pthread_mutex_destroy(&o->ctx->qp_table_mutex);
		pthread_mutex_destroy(&o->ctx->srq_table_mutex);
		pthread_mutex_destroy(&o->ctx->uidx_table_mutex);
		pthread_mutex_destroy(&o->ctx->mkey_table_mutex);
	}
	free(o->wc_tmp);
	free(o->cq_db);
	free(o->cq_buf);
	free(o->rq_wqe_head);
	free(o->rq_wrid);
	free(o->sq_wr_data);
	free(o->sq_wqe_head);
	free(o->sq_wrid);
	free(o->qp_db);
	free(o->bf_reg);
	free(o->sq);
	free(o->qp);
	free(o->cq);
	free(o->pd);
	free(o->ctx);
	free(o);
}

static int check_config(const struct ibgda_oracle_config *c, char *err,
			size_t errlen)
{
	if (c->transport != IBGDA_ORACLE_TRANSPORT_RC &&
	    c->transport != IBGDA_ORACLE_TRANSPORT_DCI) {
		set_err(err, errlen, "unknown transport %u", c->transport);
		return -1;
	}
	if (c->qpn >= (1u << 24)) {
		set_err(err, errlen, "qpn 0x%x does not fit in 24 bits", c->qpn);
		return -1;
	}
	if (!is_pow2(c->sq_wqebbs) || c->sq_wqebbs > ORACLE_MAX_QUEUE) {
		set_err(err, errlen, "sq_wqebbs %u: need a power of two <= %u",
			c->sq_wqebbs, ORACLE_MAX_QUEUE);
		return -1;
	}
	if (!is_pow2(c->rq_wqes) || c->rq_wqes > ORACLE_MAX_QUEUE) {
		set_err(err, errlen, "rq_wqes %u: need a power of two <= %u",
			c->rq_wqes, ORACLE_MAX_QUEUE);
		return -1;
	}
	if (!is_pow2(c->cqes) || c->cqes < 2 || c->cqes > ORACLE_MAX_QUEUE) {
		set_err(err, errlen, "cqes %u: need a power of two in 2..=%u",
			c->cqes, ORACLE_MAX_QUEUE);
		return -1;
	}
	if (c->cqe_version > 1) {
		set_err(err, errlen, "cqe_version %u: need 0 or 1", c->cqe_version);
		return -1;
	}
	if (c->bf_buf_size % 64 || c->bf_buf_size > ORACLE_MAX_BF_BUF) {
		set_err(err, errlen,
			"bf_buf_size %u: need a multiple of 64 <= %u",
			c->bf_buf_size, ORACLE_MAX_BF_BUF);
		return -1;
	}
	if (c->max_sge > ORACLE_MAX_SGE) {
		set_err(err, errlen, "max_sge %u > %u", c->max_sge,
			ORACLE_MAX_SGE);
		return -1;
	}
	if (c->max_inline_data > (1u << 20)) {
		set_err(err, errlen, "max_inline_data %u is absurd",
			c->max_inline_data);
		return -1;
	}
	return 0;
}

struct ibgda_oracle *ibgda_oracle_new(const struct ibgda_oracle_config *cfg,
				      char *err, size_t errlen)
{
	struct ibgda_oracle *o;
	struct mlx5_context *ctx;
	struct mlx5_qp *qp;
	struct mlx5_cq *cq;
	struct ibv_qp *ibqp;
	struct ibv_qp_init_attr_ex attr_ex;
	struct mlx5dv_qp_init_attr dv_attr;
	bool dci;
	int ret;

	if (!cfg) {
		set_err(err, errlen, "no config");
		return NULL;
	}
	if (check_config(cfg, err, errlen))
		return NULL;
	dci = cfg->transport == IBGDA_ORACLE_TRANSPORT_DCI;

	o = calloc(1, sizeof(*o));
	if (!o)
		goto oom;
	o->cfg = *cfg;
	o->uidx = -1;

	/* context: one InfiniBand port, no debug output */
	o->ctx = ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		goto oom;
	pthread_mutex_init(&ctx->qp_table_mutex, NULL);
	pthread_mutex_init(&ctx->srq_table_mutex, NULL);
	pthread_mutex_init(&ctx->uidx_table_mutex, NULL);
	pthread_mutex_init(&ctx->mkey_table_mutex, NULL);
	ctx->num_ports = 1;
	ctx->cached_link_layer[0] = IBV_LINK_LAYER_INFINIBAND;
	ctx->cached_port_flags[0] = 0;
	ctx->dbg_fp = NULL;
	ctx->cqe_version = (int)cfg->cqe_version;
	ctx->prefer_bf = cfg->prefer_bf ? 1 : 0;
	ctx->shut_up_bf = cfg->shut_up_bf ? 1 : 0;

	o->pd = calloc(1, sizeof(*o->pd));
	if (!o->pd)
		goto oom;
	o->pd->ibv_pd.context = &ctx->ibv_ctx.context;

	/* buffers */
	o->sq_bytes = (size_t)cfg->sq_wqebbs * MLX5_SEND_WQE_BB;
	o->sq = page_alloc(o->sq_bytes);
	o->bf_bytes = 2 * (size_t)(cfg->bf_buf_size > 64 ? cfg->bf_buf_size : 64);
	o->bf_reg = page_alloc(o->bf_bytes);
	o->qp_db = page_alloc(ORACLE_DBREC_BYTES);
	o->sq_wrid = calloc(cfg->sq_wqebbs, sizeof(*o->sq_wrid));
	o->sq_wqe_head = calloc(cfg->sq_wqebbs, sizeof(*o->sq_wqe_head));
	o->sq_wr_data = calloc(cfg->sq_wqebbs, sizeof(*o->sq_wr_data));
	o->rq_wrid = calloc(cfg->rq_wqes, sizeof(*o->rq_wrid));
	o->rq_wqe_head = calloc(cfg->rq_wqes, sizeof(*o->rq_wqe_head));
	o->cq_bytes = (size_t)cfg->cqes * 64;
	o->cq_buf = page_alloc(o->cq_bytes);
	o->cq_db = page_alloc(ORACLE_DBREC_BYTES);
	if (!o->sq || !o->bf_reg || !o->qp_db || !o->sq_wrid ||
	    !o->sq_wqe_head || !o->sq_wr_data || !o->rq_wrid ||
	    !o->rq_wqe_head || !o->cq_buf || !o->cq_db)
		goto oom;

	/* BlueFlame register: a plain buffer; uuarn 0 means "never BlueFlame" */
	o->bf.reg = o->bf_reg;
	o->bf.need_lock = 0;
	o->bf.lock.need_lock = 0;
	o->bf.offset = 0;
	o->bf.buf_size = cfg->bf_buf_size;
	o->bf.uuarn = cfg->bf_buf_size ? 1 : 0;

	/* CQ: 64-byte CQEs, used as send and receive CQ */
	o->cq = cq = calloc(1, sizeof(*cq));
	if (!cq)
		goto oom;
	cq->verbs_cq.cq.context = &ctx->ibv_ctx.context;
	cq->verbs_cq.cq.cqe = (int)cfg->cqes - 1;
	cq->buf_a.buf = o->cq_buf;
	cq->buf_a.length = o->cq_bytes;
	cq->active_buf = &cq->buf_a;
	cq->active_cqes = (int)cfg->cqes;
	cq->cqe_sz = 64;
	cq->dbrec = (__be32 *)o->cq_db;
	cq->lock.need_lock = 0;
	memset(o->cq_buf, 0xff, o->cq_bytes);

	/* QP */
	o->qp = qp = calloc(1, sizeof(*qp));
	if (!qp)
		goto oom;
	ibqp = &qp->verbs_qp.qp;
	qp->ibv_qp = ibqp;
	qp->verbs_qp.comp_mask = VERBS_QP_EX;
	ibqp->context = &ctx->ibv_ctx.context;
	ibqp->pd = &o->pd->ibv_pd;
	ibqp->send_cq = &cq->verbs_cq.cq;
	ibqp->recv_cq = &cq->verbs_cq.cq;
	ibqp->qp_num = cfg->qpn;
	ibqp->qp_type = dci ? IBV_QPT_DRIVER : IBV_QPT_RC;
	ibqp->state = IBV_QPS_RTS;
	qp->dc_type = dci ? MLX5DV_DCTYPE_DCI : 0;

	qp->buf.buf = o->sq;
	qp->buf.length = o->sq_bytes;
	qp->sq_start = o->sq;
	qp->sq.wrid = o->sq_wrid;
	qp->sq.wqe_head = o->sq_wqe_head;
	qp->sq.wr_data = o->sq_wr_data;
	qp->sq.lock.need_lock = 0;
	qp->sq.wqe_cnt = cfg->sq_wqebbs;
	qp->sq.max_post = cfg->sq_wqebbs;
	qp->sq.max_gs = (int)cfg->max_sge;
	qp->sq.qp_state_max_gs = (int)cfg->max_sge;
	qp->sq.wqe_shift = MLX5_SEND_WQE_SHIFT;
	qp->sq.offset = 0;
	qp->sq.qend = o->sq + o->sq_bytes;

	qp->rq.wrid = o->rq_wrid;
	qp->rq.wqe_head = o->rq_wqe_head;
	qp->rq.lock.need_lock = 0;
	qp->rq.wqe_cnt = cfg->rq_wqes;
	qp->rq.max_post = cfg->rq_wqes;
	qp->rq.max_gs = 1;
	qp->rq.qp_state_max_gs = 1;
	qp->rq.wqe_shift = 4;

	qp->max_inline_data = (int)cfg->max_inline_data;
	qp->atomics_enabled = 1;
	qp->sq_signal_bits = cfg->sq_sig_all ? MLX5_WQE_CTRL_CQ_UPDATE : 0;
	qp->fm_cache = 0;
	qp->wq_sig = 0;
	qp->db = (__be32 *)o->qp_db;
	qp->bf = &o->bf;

	/* resource lookup for CQ polling: by QPN (v0) or by user index (v1) */
	qp->rsc.type = MLX5_RSC_TYPE_QP;
	qp->rsc.rsn = cfg->qpn;
	if (mlx5_store_qp(ctx, cfg->qpn, qp))
		goto oom;
	o->qp_stored = true;
	if (cfg->cqe_version) {
		o->uidx = mlx5_store_uidx(ctx, qp);
		if (o->uidx < 0)
			goto oom;
		qp->rsc.rsn = (uint32_t)o->uidx;
	}

	/* the ibv_wr_* / mlx5dv_wr_* builders, as mlx5_create_qp_ex installs them */
	memset(&attr_ex, 0, sizeof(attr_ex));
	memset(&dv_attr, 0, sizeof(dv_attr));
	attr_ex.qp_type = ibqp->qp_type;
	attr_ex.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	attr_ex.pd = ibqp->pd;
	attr_ex.send_cq = ibqp->send_cq;
	attr_ex.recv_cq = ibqp->recv_cq;
	attr_ex.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE |
				 IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
				 IBV_QP_EX_WITH_RDMA_READ |
				 IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
				 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
	if (dci) {
		dv_attr.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC;
		dv_attr.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCI;
	}
	ret = mlx5_qp_fill_wr_pfns(qp, &attr_ex, &dv_attr);
	if (ret) {
		set_err(err, errlen, "mlx5_qp_fill_wr_pfns failed: %d", ret);
		ibgda_oracle_free(o);
		return NULL;
	}
	return o;

oom:
	set_err(err, errlen, "out of memory building the fake objects");
	ibgda_oracle_free(o);
	return NULL;
}

uint32_t ibgda_oracle_user_index(const struct ibgda_oracle *o)
{
	return o->uidx < 0 ? UINT32_MAX : (uint32_t)o->uidx;
}

size_t ibgda_oracle_ring_bytes(const struct ibgda_oracle *o)
{
	return o->sq_bytes;
}

size_t ibgda_oracle_bf_bytes(const struct ibgda_oracle *o)
{
	return o->bf_bytes;
}

/* ---- Level 2: posting ------------------------------------------------------- */

static void reset_sq(struct ibgda_oracle *o, uint32_t cur_post, uint8_t prefill,
		     uint8_t bf_prefill)
{
	struct mlx5_qp *qp = o->qp;

	memset(o->sq, prefill, o->sq_bytes);
	memset(o->qp_db, prefill, ORACLE_DBREC_BYTES);
	memset(o->bf_reg, bf_prefill, o->bf_bytes);
	memset(o->sq_wrid, 0, o->cfg.sq_wqebbs * sizeof(*o->sq_wrid));
	memset(o->sq_wqe_head, 0, o->cfg.sq_wqebbs * sizeof(*o->sq_wqe_head));
	memset(o->sq_wr_data, 0, o->cfg.sq_wqebbs * sizeof(*o->sq_wr_data));
	qp->sq.head = 0;
	qp->sq.tail = 0;
	qp->sq.cur_post = cur_post;
	qp->fm_cache = 0;
	o->bf.offset = 0;
}

static unsigned int verbs_send_flags(uint32_t flags, bool inl)
{
	unsigned int f = 0;

	if (flags & IBGDA_ORACLE_FLAG_SIGNALED)
		f |= IBV_SEND_SIGNALED;
	if (flags & IBGDA_ORACLE_FLAG_FENCE)
		f |= IBV_SEND_FENCE;
	if (flags & IBGDA_ORACLE_FLAG_SOLICITED)
		f |= IBV_SEND_SOLICITED;
	if (inl)
		f |= IBV_SEND_INLINE;
	return f;
}

static int check_wr(const struct ibgda_oracle *o, uint32_t path,
		    const struct ibgda_oracle_wr *wr)
{
	bool dci = o->cfg.transport == IBGDA_ORACLE_TRANSPORT_DCI;

	if (wr->opcode > IBGDA_ORACLE_OP_ATOMIC_FETCH_AND_ADD)
		return -EINVAL;
	if (wr->flags & ~(uint32_t)(IBGDA_ORACLE_FLAG_SIGNALED |
				    IBGDA_ORACLE_FLAG_FENCE |
				    IBGDA_ORACLE_FLAG_SOLICITED))
		return -EINVAL;
	if (wr->is_inline) {
		if (wr->num_inl > ORACLE_MAX_SGE ||
		    (wr->num_inl && !wr->inl))
			return -EINVAL;
	} else {
		if (wr->num_sge > ORACLE_MAX_SGE || (wr->num_sge && !wr->sges))
			return -EINVAL;
	}
	if (dci) {
		/* mlx5_post_send has no DC case: it would emit neither an
		 * address vector nor a remote-address segment. */
		if (path == IBGDA_ORACLE_PATH_CLASSIC)
			return -EINVAL;
		if (wr->dc.av_kind != IBGDA_ORACLE_AV_IB &&
		    wr->dc.av_kind != IBGDA_ORACLE_AV_RAW)
			return -EINVAL;
	} else if (wr->dc.av_kind != IBGDA_ORACLE_AV_NONE) {
		return -EINVAL;
	}
	return 0;
}

/* Fills the verbs work request `v` from `w`, its SGEs (or inline chunks, as SGEs
 * over host memory) going to `sg`, which has room for them; returns how many
 * entries of `sg` it used. */
static size_t to_send_wr(const struct ibgda_oracle_wr *w, struct ibv_send_wr *v,
			 struct ibv_sge *sg)
{
	size_t used = 0;
	uint32_t j;

	v->wr_id = w->wr_id;
	v->send_flags = verbs_send_flags(w->flags, w->is_inline);
	if (w->is_inline) {
		/* inline gathers from the SGEs' addresses (host memory) */
		for (j = 0; j < w->num_inl; j++) {
			sg[used].addr = (uintptr_t)w->inl[j].addr;
			sg[used].length = (uint32_t)w->inl[j].length;
			sg[used].lkey = 0;
			used++;
		}
		v->num_sge = (int)w->num_inl;
	} else {
		for (j = 0; j < w->num_sge; j++) {
			sg[used].addr = w->sges[j].addr;
			sg[used].length = w->sges[j].length;
			sg[used].lkey = w->sges[j].lkey;
			used++;
		}
		v->num_sge = (int)w->num_sge;
	}
	v->sg_list = v->num_sge ? sg : NULL;

	switch (w->opcode) {
	case IBGDA_ORACLE_OP_RDMA_WRITE:
		v->opcode = IBV_WR_RDMA_WRITE;
		break;
	case IBGDA_ORACLE_OP_RDMA_WRITE_WITH_IMM:
		v->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		v->imm_data = htobe32(w->imm);
		break;
	case IBGDA_ORACLE_OP_RDMA_READ:
		v->opcode = IBV_WR_RDMA_READ;
		break;
	case IBGDA_ORACLE_OP_ATOMIC_CMP_AND_SWP:
		v->opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
		break;
	default:
		v->opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
		break;
	}
	if (w->opcode == IBGDA_ORACLE_OP_ATOMIC_CMP_AND_SWP ||
	    w->opcode == IBGDA_ORACLE_OP_ATOMIC_FETCH_AND_ADD) {
		v->wr.atomic.remote_addr = w->remote_addr;
		v->wr.atomic.rkey = w->rkey;
		v->wr.atomic.compare_add = w->compare_add;
		v->wr.atomic.swap = w->swap;
	} else {
		v->wr.rdma.remote_addr = w->remote_addr;
		v->wr.rdma.rkey = w->rkey;
	}
	return used;
}

static int post_classic(struct ibgda_oracle *o, const struct ibgda_oracle_wr *wrs,
			uint32_t nwr, struct ibgda_oracle_post_result *res)
{
	struct ibv_send_wr *vw;
	struct ibv_send_wr *bad = NULL;
	struct ibv_sge *sg;
	size_t total_sge = 0, used = 0;
	uint32_t i;
	int ret;

	for (i = 0; i < nwr; i++)
		total_sge += wrs[i].is_inline ? wrs[i].num_inl : wrs[i].num_sge;
	vw = calloc(nwr ? nwr : 1, sizeof(*vw));
	sg = calloc(total_sge ? total_sge : 1, sizeof(*sg));
	if (!vw || !sg) {
		free(vw);
		free(sg);
		return -ENOMEM;
	}

	for (i = 0; i < nwr; i++) {
		used += to_send_wr(&wrs[i], &vw[i], &sg[used]);
		vw[i].next = i + 1 < nwr ? &vw[i + 1] : NULL;
	}

	ret = nwr ? mlx5_post_send(o->qp->ibv_qp, vw, &bad) : 0;
	res->err = ret;
	res->bad_wr = (ret && bad) ? (int32_t)(bad - vw) : -1;
	free(sg);
	free(vw);
	return 0;
}

static struct ibv_ah *make_ah(struct ibgda_oracle *o,
			      const struct ibgda_oracle_dc *dc)
{
	struct ibv_ah_attr attr;
	struct mlx5_ah *mah;

	if (dc->av_kind == IBGDA_ORACLE_AV_RAW) {
		/* what a RoCE AH would hold; the real one needs sysfs + kernel */
		mah = calloc(1, sizeof(*mah));
		if (!mah)
			return NULL;
		mah->ibv_ah.context = &o->ctx->ibv_ctx.context;
		mah->ibv_ah.pd = &o->pd->ibv_pd;
		memcpy(&mah->av, dc->raw, sizeof(mah->av));
		return &mah->ibv_ah;
	}

	memset(&attr, 0, sizeof(attr));
	attr.dlid = dc->dlid;
	attr.sl = dc->sl;
	attr.src_path_bits = dc->src_path_bits;
	attr.static_rate = dc->static_rate;
	attr.is_global = dc->is_global;
	attr.port_num = 1;
	if (dc->is_global) {
		memcpy(attr.grh.dgid.raw, dc->dgid, sizeof(attr.grh.dgid.raw));
		attr.grh.flow_label = dc->flow_label;
		attr.grh.sgid_index = dc->sgid_index;
		attr.grh.hop_limit = dc->hop_limit;
		attr.grh.traffic_class = dc->traffic_class;
	}
	return mlx5_create_ah(&o->pd->ibv_pd, &attr);
}

static void drop_ah(const struct ibgda_oracle_dc *dc, struct ibv_ah *ah)
{
	if (!ah)
		return;
	if (dc->av_kind == IBGDA_ORACLE_AV_RAW) {
		free(to_mah(ah));
		return;
	}
	pthread_mutex_destroy(&to_mah(ah)->mutex);
	mlx5_destroy_ah(ah);
}

static int post_extended(struct ibgda_oracle *o,
			 const struct ibgda_oracle_wr *wrs, uint32_t nwr,
			 struct ibgda_oracle_post_result *res)
{
	bool dci = o->cfg.transport == IBGDA_ORACLE_TRANSPORT_DCI;
	struct ibv_qp_ex *qpx = ibv_qp_to_qp_ex(o->qp->ibv_qp);
	struct mlx5dv_qp_ex *dvqp;
	struct ibv_ah **ahs;
	struct ibv_sge sg[ORACLE_MAX_SGE];
	struct ibv_data_buf db[ORACLE_MAX_SGE];
	uint32_t i, j;
	int ret = 0;

	if (!qpx)
		return -EINVAL;
	dvqp = mlx5dv_qp_ex_from_ibv_qp_ex(qpx);
	ahs = calloc(nwr ? nwr : 1, sizeof(*ahs));
	if (!ahs)
		return -ENOMEM;
	if (dci) {
		for (i = 0; i < nwr; i++) {
			ahs[i] = make_ah(o, &wrs[i].dc);
			if (!ahs[i]) {
				ret = -EINVAL;
				goto out;
			}
		}
	}

	ibv_wr_start(qpx);
	for (i = 0; i < nwr; i++) {
		const struct ibgda_oracle_wr *w = &wrs[i];

		qpx->wr_id = w->wr_id;
		qpx->wr_flags = verbs_send_flags(w->flags, w->is_inline);
		switch (w->opcode) {
		case IBGDA_ORACLE_OP_RDMA_WRITE:
			ibv_wr_rdma_write(qpx, w->rkey, w->remote_addr);
			break;
		case IBGDA_ORACLE_OP_RDMA_WRITE_WITH_IMM:
			ibv_wr_rdma_write_imm(qpx, w->rkey, w->remote_addr,
					      htobe32(w->imm));
			break;
		case IBGDA_ORACLE_OP_RDMA_READ:
			ibv_wr_rdma_read(qpx, w->rkey, w->remote_addr);
			break;
		case IBGDA_ORACLE_OP_ATOMIC_CMP_AND_SWP:
			ibv_wr_atomic_cmp_swp(qpx, w->rkey, w->remote_addr,
					      w->compare_add, w->swap);
			break;
		default:
			ibv_wr_atomic_fetch_add(qpx, w->rkey, w->remote_addr,
						w->compare_add);
			break;
		}
		if (dci)
			mlx5dv_wr_set_dc_addr(dvqp, ahs[i], w->dc.dctn,
					      w->dc.dc_key);
		if (w->is_inline) {
			if (w->num_inl == 1) {
				ibv_wr_set_inline_data(qpx, (void *)w->inl[0].addr,
						       w->inl[0].length);
			} else {
				for (j = 0; j < w->num_inl; j++) {
					db[j].addr = (void *)w->inl[j].addr;
					db[j].length = w->inl[j].length;
				}
				ibv_wr_set_inline_data_list(qpx, w->num_inl, db);
			}
		} else if (w->num_sge == 1) {
			ibv_wr_set_sge(qpx, w->sges[0].lkey, w->sges[0].addr,
				       w->sges[0].length);
		} else {
			for (j = 0; j < w->num_sge; j++) {
				sg[j].addr = w->sges[j].addr;
				sg[j].length = w->sges[j].length;
				sg[j].lkey = w->sges[j].lkey;
			}
			ibv_wr_set_sge_list(qpx, w->num_sge, sg);
		}
	}
	res->err = ibv_wr_complete(qpx);
	res->bad_wr = -1;

out:
	if (dci)
		for (i = 0; i < nwr; i++)
			drop_ah(&wrs[i].dc, ahs[i]);
	free(ahs);
	return ret;
}

int ibgda_oracle_post(struct ibgda_oracle *o, uint32_t path, uint32_t cur_post,
		      const struct ibgda_oracle_wr *wrs, uint32_t nwr,
		      uint8_t prefill, uint8_t bf_prefill,
		      const struct ibgda_oracle_capture *cap,
		      struct ibgda_oracle_post_result *res)
{
	uint32_t i;
	int ret;

	memset(res, 0, sizeof(*res));
	res->bad_wr = -1;
	if (path != IBGDA_ORACLE_PATH_CLASSIC && path != IBGDA_ORACLE_PATH_EXTENDED)
		ret = -EINVAL;
	else if (nwr > ORACLE_MAX_WR || (nwr && !wrs))
		ret = -EINVAL;
	else
		ret = 0;
	for (i = 0; !ret && i < nwr; i++)
		ret = check_wr(o, path, &wrs[i]);
	if (ret) {
		res->err = ret;
		return ret;
	}

	reset_sq(o, cur_post, prefill, bf_prefill);
	if (path == IBGDA_ORACLE_PATH_CLASSIC)
		ret = post_classic(o, wrs, nwr, res);
	else
		ret = post_extended(o, wrs, nwr, res);
	if (ret) {
		res->err = ret;
		return ret;
	}

	res->cur_post = o->qp->sq.cur_post;
	res->sq_head = o->qp->sq.head;
	res->bf_offset = o->bf.offset;
	if (cap && cap->ring)
		memcpy(cap->ring, o->sq, o->sq_bytes);
	if (cap && cap->dbrec)
		memcpy(cap->dbrec, o->qp_db, 8);
	if (cap && cap->bf)
		memcpy(cap->bf, o->bf_reg, o->bf_bytes);
	return 0;
}

/* ---- Level 2: polling ------------------------------------------------------- */

int ibgda_oracle_poll(struct ibgda_oracle *o, uint32_t cons_index,
		      const uint8_t *cqes, uint32_t ncqes,
		      uint64_t sq_wrid_base, uint64_t rq_wrid_base,
		      uint8_t prefill, struct ibgda_oracle_wc *wcs,
		      uint32_t max_wc, struct ibgda_oracle_poll_result *res)
{
	struct mlx5_qp *qp = o->qp;
	struct mlx5_cq *cq = o->cq;
	uint32_t mask = o->cfg.cqes - 1;
	uint32_t i;
	int ret;

	memset(res, 0, sizeof(*res));
	if (ncqes > o->cfg.cqes || (ncqes && !cqes) || (max_wc && !wcs) ||
	    max_wc > ORACLE_MAX_QUEUE)
		return -EINVAL;
	for (i = 0; i < ncqes; i++) {
		uint8_t op_own = cqes[(size_t)i * 64 + 63];

		/* scatter-to-CQE: the provider would memcpy to WQE addresses */
		if ((op_own >> 4) <= MLX5_CQE_RESP_SEND_INV &&
		    (op_own & (MLX5_INLINE_SCATTER_32 | MLX5_INLINE_SCATTER_64)))
			return -EINVAL;
	}

	if (max_wc > o->wc_tmp_len) {
		struct ibv_wc *n = realloc(o->wc_tmp, max_wc * sizeof(*n));

		if (!n)
			return -ENOMEM;
		o->wc_tmp = n;
		o->wc_tmp_len = max_wc;
	}

	memset(o->cq_buf, 0xff, o->cq_bytes);
	for (i = 0; i < ncqes; i++)
		memcpy(o->cq_buf + (size_t)((cons_index + i) & mask) * 64,
		       cqes + (size_t)i * 64, 64);
	memset(o->cq_db, prefill, ORACLE_DBREC_BYTES);
	cq->cons_index = cons_index;
	cq->cur_rsc = NULL;
	cq->cur_srq = NULL;
	cq->flags = 0;

	for (i = 0; i < o->cfg.sq_wqebbs; i++) {
		o->sq_wrid[i] = sq_wrid_base + i;
		o->sq_wqe_head[i] = i;
		o->sq_wr_data[i] = 0;
	}
	for (i = 0; i < o->cfg.rq_wqes; i++) {
		o->rq_wrid[i] = rq_wrid_base + i;
		o->rq_wqe_head[i] = i;
	}
	qp->sq.head = 0;
	qp->sq.tail = 0;
	qp->rq.head = 0;
	qp->rq.tail = 0;

	if (max_wc)
		memset(o->wc_tmp, prefill, max_wc * sizeof(*o->wc_tmp));
	if (o->cfg.cqe_version)
		ret = mlx5_poll_cq_v1(&cq->verbs_cq.cq, (int)max_wc, o->wc_tmp);
	else
		ret = mlx5_poll_cq(&cq->verbs_cq.cq, (int)max_wc, o->wc_tmp);

	for (i = 0; i < max_wc; i++) {
		const struct ibv_wc *s = &o->wc_tmp[i];
		struct ibgda_oracle_wc *d = &wcs[i];

		memset(d, 0, sizeof(*d));
		d->wr_id = s->wr_id;
		d->status = (uint32_t)s->status;
		d->opcode = (uint32_t)s->opcode;
		d->vendor_err = s->vendor_err;
		d->byte_len = s->byte_len;
		memcpy(&d->imm_data, &s->imm_data, sizeof(d->imm_data));
		d->qp_num = s->qp_num;
		d->src_qp = s->src_qp;
		d->wc_flags = s->wc_flags;
		d->pkey_index = s->pkey_index;
		d->slid = s->slid;
		d->sl = s->sl;
		d->dlid_path_bits = s->dlid_path_bits;
	}

	res->ret = ret;
	res->cons_index = cq->cons_index;
	res->sq_tail = qp->sq.tail;
	res->rq_tail = qp->rq.tail;
	memcpy(res->cq_dbrec, o->cq_db, sizeof(res->cq_dbrec));
	return 0;
}

/* ---- Post rate: the provider's own loop, for the benchmark -------------------- */

int ibgda_oracle_post_loop(struct ibgda_oracle *o, const struct ibgda_oracle_wr *wr,
			   uint64_t count, uint32_t retire_every,
			   struct ibgda_oracle_post_result *res)
{
	struct ibv_send_wr v;
	struct ibv_send_wr *bad = NULL;
	struct ibv_sge sg[ORACLE_MAX_SGE];
	uint64_t n;
	int ret;

	memset(res, 0, sizeof(*res));
	res->bad_wr = -1;
	if (!wr || !retire_every) {
		res->err = -EINVAL;
		return -EINVAL;
	}
	ret = check_wr(o, IBGDA_ORACLE_PATH_CLASSIC, wr);
	if (ret) {
		res->err = ret;
		return ret;
	}
	memset(&v, 0, sizeof(v));
	to_send_wr(wr, &v, sg);
	reset_sq(o, 0, 0, 0);
	for (n = 0; n < count; n++) {
		ret = mlx5_post_send(o->qp->ibv_qp, &v, &bad);
		if (ret) {
			res->err = ret;
			break;
		}
		/* What a polled completion does: slots up to the last rung WQE are free. */
		if ((n + 1) % retire_every == 0)
			o->qp->sq.tail = o->qp->sq.head;
	}
	res->cur_post = o->qp->sq.cur_post;
	res->sq_head = o->qp->sq.head;
	res->bf_offset = o->bf.offset;
	return 0;
}
