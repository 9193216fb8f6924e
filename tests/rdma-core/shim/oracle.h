/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * ibgda rdma-core oracle: a plain-C interface over rdma-core's mlx5 provider,
 * run on memory-only fake objects (no device, no kernel).
 *
 * Everything here is plain data: fixed-width integers, byte buffers and arrays
 * of the structs below. src/lib.rs mirrors these declarations with #[repr(C)]
 * types; keep both in sync (tests/smoke.rs checks the sizes).
 */
#ifndef IBGDA_ORACLE_H
#define IBGDA_ORACLE_H

#include <stddef.h>
#include <stdint.h>

/* ---- Level 1: layouts and constants of the provider's headers -------------- */

struct ibgda_oracle_field {
	const char *name;    /* "opmod_idx_opcode", "key.dc_key", ... */
	uint32_t offset;     /* offsetof */
	uint32_t size;       /* sizeof the member */
};

struct ibgda_oracle_layout {
	const char *name;    /* "mlx5_wqe_ctrl_seg", ... */
	uint32_t size;       /* sizeof the struct */
	uint32_t align;      /* _Alignof the struct */
	uint32_t nfields;
	const struct ibgda_oracle_field *fields;
};

/* Table entries: a member of a struct, and a struct with its table of members. */
#define FIELD(type, member)                                                   \
	{ #member, (uint32_t)offsetof(type, member),                          \
	  (uint32_t)sizeof(((type *)0)->member) }

#define LAYOUT(type, table)                                                   \
	{ #type, (uint32_t)sizeof(type), (uint32_t)_Alignof(type),            \
	  (uint32_t)(sizeof(table) / sizeof((table)[0])), (table) }

struct ibgda_oracle_constant {
	const char *name;    /* the C identifier, e.g. "MLX5_OPCODE_RDMA_WRITE" */
	uint64_t value;
};

/* Static tables; the pointers stay valid for the life of the process. */
size_t ibgda_oracle_layouts(const struct ibgda_oracle_layout **out);
/* The public verbs and mlx5dv structures the emulated ConnectX uses (verbs_abi.c). */
size_t ibgda_oracle_verbs_layouts(const struct ibgda_oracle_layout **out);
size_t ibgda_oracle_constants(const struct ibgda_oracle_constant **out);

/*
 * Wrappers over the static inline helpers of mlx5dv.h. Each reads the
 * caller's buffer first and writes it back after the helper ran, so bytes the
 * helper does not store keep the caller's values.
 */
void ibgda_oracle_set_ctrl_seg(uint8_t seg[16], uint16_t pi, uint8_t opcode,
			       uint8_t opmod, uint32_t qp_num, uint8_t fm_ce_se,
			       uint8_t ds, uint8_t signature, uint32_t imm);
void ibgda_oracle_set_data_seg(uint8_t seg[16], uint32_t length, uint32_t lkey,
			       uint64_t address);
void ibgda_oracle_set_dgram_seg(uint8_t seg[48], uint64_t key, uint32_t dqp_dct,
				uint8_t ext, uint8_t stat_rate_sl,
				uint8_t fl_mlid, uint16_t rlid,
				const uint8_t rmac[6], uint8_t tclass,
				uint8_t hop_limit, uint32_t grh_gid_fl,
				const uint8_t rgid[16]);
uint8_t ibgda_oracle_cqe_owner(const uint8_t cqe[64]);
uint8_t ibgda_oracle_cqe_se(const uint8_t cqe[64]);
uint8_t ibgda_oracle_cqe_format(const uint8_t cqe[64]);
uint8_t ibgda_oracle_cqe_opcode(const uint8_t cqe[64]);

/* ---- Level 2: the provider on fake objects ----------------------------------- */

enum {
	IBGDA_ORACLE_TRANSPORT_RC = 0,
	IBGDA_ORACLE_TRANSPORT_DCI = 1,
};

struct ibgda_oracle_config {
	uint32_t transport;        /* IBGDA_ORACLE_TRANSPORT_* */
	uint32_t qpn;              /* < 2^24 */
	uint32_t sq_wqebbs;        /* power of two, 1..=65536 */
	uint32_t max_inline_data;  /* qp->max_inline_data */
	uint32_t max_sge;          /* sq.max_gs and sq.qp_state_max_gs */
	uint32_t sq_sig_all;       /* nonzero: sq_signal_bits = MLX5_WQE_CTRL_CQ_UPDATE */
	uint32_t rq_wqes;          /* power of two, 1..=65536 (responder CQEs) */
	uint32_t cqes;             /* power of two, 2..=65536 (64-byte CQEs) */
	uint32_t cqe_version;      /* 0: CQEs name the QP by QPN; 1: by user index */
	uint32_t bf_buf_size;      /* BlueFlame half-register size; 0: no BlueFlame (uuarn 0) */
	uint32_t prefer_bf;        /* context's prefer_bf (MLX5_POST_SEND_PREFER_BF) */
	uint32_t shut_up_bf;       /* context's shut_up_bf (MLX5_SHUT_UP_BF) */
};

enum {
	IBGDA_ORACLE_OP_RDMA_WRITE = 0,
	IBGDA_ORACLE_OP_RDMA_WRITE_WITH_IMM = 1,
	IBGDA_ORACLE_OP_RDMA_READ = 2,
	IBGDA_ORACLE_OP_ATOMIC_CMP_AND_SWP = 3,
	IBGDA_ORACLE_OP_ATOMIC_FETCH_AND_ADD = 4,
};

enum {
	IBGDA_ORACLE_FLAG_SIGNALED = 1 << 0,
	IBGDA_ORACLE_FLAG_FENCE = 1 << 1,
	IBGDA_ORACLE_FLAG_SOLICITED = 1 << 2,
};

enum {
	IBGDA_ORACLE_AV_NONE = 0,  /* RC: no address */
	IBGDA_ORACLE_AV_IB = 1,    /* mlx5_create_ah on an InfiniBand port */
	IBGDA_ORACLE_AV_RAW = 2,   /* the 48 AV bytes given in `raw` (e.g. RoCE) */
};

struct ibgda_oracle_sge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};

struct ibgda_oracle_buf {
	const uint8_t *addr;
	size_t length;
};

struct ibgda_oracle_dc {
	uint32_t av_kind;          /* IBGDA_ORACLE_AV_* */
	uint32_t dctn;             /* remote DCT number */
	uint64_t dc_key;           /* DC access key */
	/* IBGDA_ORACLE_AV_IB: fields of ibv_ah_attr (port 1) */
	uint16_t dlid;
	uint8_t sl;
	uint8_t src_path_bits;
	uint8_t static_rate;       /* enum ibv_rate */
	uint8_t is_global;
	uint8_t sgid_index;
	uint8_t hop_limit;
	uint8_t traffic_class;
	uint8_t pad0[3];
	uint32_t flow_label;
	uint8_t dgid[16];
	/* IBGDA_ORACLE_AV_RAW */
	uint8_t raw[48];
};

struct ibgda_oracle_wr {
	uint64_t wr_id;
	uint32_t opcode;           /* IBGDA_ORACLE_OP_* */
	uint32_t flags;            /* IBGDA_ORACLE_FLAG_* */
	uint64_t remote_addr;
	uint32_t rkey;
	uint32_t imm;              /* host order; passed to verbs as htobe32(imm) */
	uint64_t compare_add;      /* CAS: compare; FAA: add */
	uint64_t swap;             /* CAS: swap */
	const struct ibgda_oracle_sge *sges;
	uint32_t num_sge;
	uint32_t is_inline;        /* nonzero: payload is `inl` (IBV_SEND_INLINE) */
	const struct ibgda_oracle_buf *inl;
	uint32_t num_inl;
	uint32_t pad0;
	struct ibgda_oracle_dc dc; /* DCI only (extended path) */
};

enum {
	IBGDA_ORACLE_PATH_CLASSIC = 0,   /* mlx5_post_send (ibv_post_send) */
	IBGDA_ORACLE_PATH_EXTENDED = 1,  /* ibv_wr_start ... ibv_wr_complete */
};

/* Where the captured memory is copied to (each may be NULL). */
struct ibgda_oracle_capture {
	uint8_t *ring;             /* sq_wqebbs * 64 bytes */
	uint8_t *dbrec;            /* 8 bytes: [0..4) receive counter, [4..8) send counter */
	uint8_t *bf;               /* 2 * max(bf_buf_size, 64) bytes: the whole fake register */
};

struct ibgda_oracle_post_result {
	int32_t err;               /* provider's return value: 0 or an errno */
	int32_t bad_wr;            /* classic: index of *bad_wr, else -1 */
	uint32_t cur_post;         /* sq.cur_post after the call */
	uint32_t sq_head;          /* sq.head after the call (WQEs rung) */
	uint32_t bf_offset;        /* bf->offset after the call */
	uint32_t reserved;
};

struct ibgda_oracle_wc {
	uint64_t wr_id;
	uint32_t status;
	uint32_t opcode;
	uint32_t vendor_err;
	uint32_t byte_len;
	uint32_t imm_data;         /* the union as stored (imm: network order) */
	uint32_t qp_num;
	uint32_t src_qp;
	uint32_t wc_flags;
	uint16_t pkey_index;
	uint16_t slid;
	uint8_t sl;
	uint8_t dlid_path_bits;
	uint8_t pad0[10];
};

struct ibgda_oracle_poll_result {
	int32_t ret;               /* mlx5_poll_cq's return: count, or -2 (CQ_POLL_ERR) */
	uint32_t cons_index;       /* cq->cons_index after */
	uint32_t sq_tail;          /* qp->sq.tail after */
	uint32_t rq_tail;          /* qp->rq.tail after */
	uint8_t cq_dbrec[8];       /* the CQ doorbell record after */
};

/*
 * sizeof of this header's structs, in this order: config, sge, buf, dc, wr,
 * capture, post_result, wc, poll_result. Returns how many were written (<= n).
 */
size_t ibgda_oracle_abi_sizes(uint32_t *out, size_t n);

struct ibgda_oracle;

/* Returns NULL on failure with a message in err (if errlen > 0). */
struct ibgda_oracle *ibgda_oracle_new(const struct ibgda_oracle_config *cfg,
				      char *err, size_t errlen);
void ibgda_oracle_free(struct ibgda_oracle *o);
uint32_t ibgda_oracle_user_index(const struct ibgda_oracle *o);
size_t ibgda_oracle_ring_bytes(const struct ibgda_oracle *o);
size_t ibgda_oracle_bf_bytes(const struct ibgda_oracle *o);

/*
 * Resets the send queue (ring and doorbell record filled with `prefill`, the
 * BlueFlame register with `bf_prefill`; head = tail = 0; cur_post =
 * `cur_post`; fm_cache = 0; bf->offset = 0), posts `nwr` work requests in one
 * call on the chosen path, and copies the memory out. Returns 0, or -EINVAL
 * for a malformed request (then nothing was posted and res->err is set too).
 */
int ibgda_oracle_post(struct ibgda_oracle *o, uint32_t path, uint32_t cur_post,
		      const struct ibgda_oracle_wr *wrs, uint32_t nwr,
		      uint8_t prefill, uint8_t bf_prefill,
		      const struct ibgda_oracle_capture *cap,
		      struct ibgda_oracle_post_result *res);

/*
 * For the post-rate benchmark: resets the send queue (zero fill, cur_post 0),
 * then posts `wr` `count` times through mlx5_post_send (classic path, one WR
 * and one doorbell per call), capturing nothing, and moves sq.tail
 * to sq.head after every `retire_every` posts (>= 1; above sq_wqebbs the ring
 * fills and the provider refuses with ENOMEM), as a polled completion would. Stops at the first provider error (res->err). Returns 0,
 * or -EINVAL for a malformed request or a zero retire_every.
 */
int ibgda_oracle_post_loop(struct ibgda_oracle *o, const struct ibgda_oracle_wr *wr,
			   uint64_t count, uint32_t retire_every,
			   struct ibgda_oracle_post_result *res);

/*
 * Resets the CQ (every entry 0xff, i.e. opcode INVALID; cons_index =
 * `cons_index`; doorbell record = `prefill`), writes cqes[i] into entry
 * (cons_index + i) mod cqes, resets the work-request id tables
 * (sq.wrid[i] = sq_wrid_base + i, sq.wqe_head[i] = i, sq.wr_data[i] = 0,
 * rq.wrid[i] = rq_wrid_base + i, tails 0), fills `wcs` with `prefill` and calls
 * mlx5_poll_cq (cqe_version 0) or mlx5_poll_cq_v1 with ne = max_wc.
 * Returns 0, or -EINVAL if ncqes > cqes or a CQE the provider would scatter
 * into memory (opcode 0..4 with op_own & 0xc) was given.
 */
int ibgda_oracle_poll(struct ibgda_oracle *o, uint32_t cons_index,
		      const uint8_t *cqes, uint32_t ncqes,
		      uint64_t sq_wrid_base, uint64_t rq_wrid_base,
		      uint8_t prefill, struct ibgda_oracle_wc *wcs,
		      uint32_t max_wc, struct ibgda_oracle_poll_result *res);

#endif /* IBGDA_ORACLE_H */
