/* RoCE oracle (see roce.c). */
#ifndef IBGDA_ROCE_ORACLE_H
#define IBGDA_ROCE_ORACLE_H

#include <stdint.h>

struct ibgda_roce_ah {
	uint8_t dgid[16];
	uint8_t mac[6];
	uint8_t roce_v2;
	uint8_t sgid_index;
	uint32_t flow_label;
	uint8_t hop_limit;
	uint8_t traffic_class;
	uint8_t sl;
	uint8_t static_rate;
};

/* rdma-core's mlx5_create_ah on a RoCE port; copies the 48-byte mlx5_wqe_av to `av`. */
int ibgda_roce_create_ah(const struct ibgda_roce_ah *args, uint8_t av[48]);
/* rdma-core's ibv_flow_label_to_udp_sport. */
uint16_t ibgda_roce_flow_label_to_udp_sport(uint32_t flow_label);

#endif
