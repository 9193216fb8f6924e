/* PRM command oracle (see prm.c). */
#ifndef IBGDA_PRM_ORACLE_H
#define IBGDA_PRM_ORACLE_H

#include <stddef.h>
#include <stdint.h>

/* A field (or, with an empty field name, a whole structure) as mlx5_ifc.h lays it out. */
struct ibgda_prm_field {
	const char *structure;
	const char *field;
	uint32_t bit_offset;
	uint32_t bit_width;
};

struct ibgda_prm_constant {
	const char *name;
	uint64_t value;
};

const struct ibgda_prm_constant *ibgda_prm_constants(uint32_t *count);
const struct ibgda_prm_field *ibgda_prm_fields(uint32_t *count);
const struct ibgda_prm_field *ibgda_prm_structs(uint32_t *count);

/* DEVX_SET / DEVX_SET64 / a copy at DEVX_ADDR_OF / DEVX_GET(64): 0, -ENOENT, -EINVAL. */
int ibgda_prm_set(const char *structure, const char *field, void *buf, size_t len,
		  uint64_t value);
int ibgda_prm_set_bytes(const char *structure, const char *field, void *buf,
			size_t len, const uint8_t *value, size_t value_len);
int ibgda_prm_get(const char *structure, const char *field, const void *buf,
		  size_t len, uint64_t *value);

struct ibgda_prm_dr_create_qp {
	uint32_t page_id;
	uint32_t pdn;
	uint32_t cqn;
	uint32_t pm_state;
	uint32_t service_type;
	uint32_t buff_umem_id;
	uint32_t db_umem_id;
	uint32_t sq_wqe_cnt;
	uint32_t rq_wqe_cnt;
	uint32_t rq_wqe_shift;
	uint32_t isolate_vl_tc;
	uint32_t qp_ts_format;
};

struct ibgda_prm_dr_rtr {
	uint8_t gid[16];
	uint8_t mac[6];
	uint8_t roce_v2;
	uint8_t fl;
	uint32_t mtu;
	uint32_t qp_num;
	uint16_t port_num;
	uint8_t min_rnr_timer;
	uint8_t sgid_index;
};

/* Run rdma-core's dr_devx_* and copy the command input it would send to `out`. */
int ibgda_prm_dr_create_qp(const struct ibgda_prm_dr_create_qp *args, uint8_t *out,
			   size_t out_len, size_t *written);
int ibgda_prm_dr_rst2init(uint32_t qpn, uint16_t port, uint8_t *out, size_t out_len,
			  size_t *written);
int ibgda_prm_dr_init2rtr(uint32_t qpn, const struct ibgda_prm_dr_rtr *args,
			  uint8_t *out, size_t out_len, size_t *written);
int ibgda_prm_dr_rtr2rts(uint32_t qpn, uint8_t timeout, uint8_t retry_cnt,
			 uint8_t rnr_retry, uint8_t *out, size_t out_len, size_t *written);
uint32_t ibgda_prm_dr_chunk_size_max(void);

#endif
